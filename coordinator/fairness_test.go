package coordinator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/config"
	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestProjectLimitOneRound: project survey-a has 1,000 queued jobs and a
// limit of 2 running, survey-b has 5 queued after them; in the first
// scheduling round survey-a gets 2 phones and survey-b all 5 of its jobs.
// The round is the scheduler's own (Server.scheduleOnce, what the loop runs
// on each tick or kick), run once by the test on a coordinator built from a
// config file by NewDaemon, with real NATS and agents that accept their
// assigns; the project_jobs gauge shows the result on /metrics.
func TestProjectLimitOneRound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) jobstore.Store
	}{
		{"sqlite", func(t *testing.T) jobstore.Store { return openSQLite(t) }},
		{"postgres", func(t *testing.T) jobstore.Store { return openPostgres(t, testenv.Postgres(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testProjectLimitOneRound(t, tc.store(t)) })
	}
}

func testProjectLimitOneRound(t *testing.T, store jobstore.Store) {
	ctx := t.Context()
	const queuedA, queuedB, agents, phonesEach = 1000, 5, 4, 2
	for i := range queuedA {
		if _, err := store.Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("a-%04d", i), Project: "survey-a", Task: task(protocol.DeviceSelector{})}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Millisecond) // survey-b's jobs are younger on millisecond clocks too
	for i := range queuedB {
		if _, err := store.Submit(ctx, jobstore.JobSpec{ID: fmt.Sprintf("b-%d", i), Project: "survey-b", Task: task(protocol.DeviceSelector{})}); err != nil {
			t.Fatal(err)
		}
	}

	ns := testenv.NATS(t)
	cfg, err := config.ParseCoordinator("coordinator.yaml", []byte(fmt.Sprintf(
		"nats:\n  url: %s\nmetrics:\n  listen: ''\njobs:\n  default_max_running: 0\nprojects:\n  survey-a:\n    max_running: 2\n", ns.ClientURL())))
	if err != nil {
		t.Fatal(err)
	}
	d, err := coordinator.NewDaemon(cfg, coordinator.System{Store: store, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := d.Server()

	// Agents with eight free phones in all, each accepting its assigns.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var (
		mu       sync.Mutex
		assigned = map[string]string{} // job -> agent
	)
	for a := range agents {
		id := fmt.Sprintf("pc-%d", a)
		var devs []protocol.Device
		for p := range phonesEach {
			devs = append(devs, phone(fmt.Sprintf("%s-P%d", id, p)))
		}
		if _, _, err := store.AgentHello(ctx, jobstore.AgentHello{AgentID: id, BootID: "boot-1", Devices: devs, Slots: phonesEach, CoordinatorID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Subscribe(protocol.AgentSubject(id, protocol.VerbAssign), func(m *nats.Msg) {
			var as protocol.Assign
			if err := json.Unmarshal(m.Data, &as); err == nil {
				mu.Lock()
				assigned[as.Token.JobID] = id
				mu.Unlock()
			}
			data, _ := json.Marshal(protocol.Ack{OK: true})
			_ = m.Respond(data)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	srv.ScheduleOnce(ctx)
	running := func(project string) []string {
		t.Helper()
		js, err := store.ListJobs(ctx, jobstore.JobFilter{Project: project, Statuses: []string{jobstore.StatusInProgress}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range js {
			ids = append(ids, j.ID)
		}
		return ids
	}
	if got := running("survey-b"); len(got) != queuedB {
		t.Fatalf("after one round survey-b runs %v, want all %d of its jobs", got, queuedB)
	}
	if got := running("survey-a"); len(got) != 2 {
		t.Fatalf("after one round survey-a runs %v, want its limit of 2", got)
	}
	// The agents took every assign: the jobs stay theirs.
	testenv.Eventually(t, 10*time.Second, "7 assigns delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(assigned) == queuedB+2
	})
	srv.WaitBackground()

	// A second round grants nothing: survey-a is at its limit and one
	// phone free does not change that.
	srv.ScheduleOnce(ctx)
	srv.WaitBackground()
	if a, b := running("survey-a"), running("survey-b"); len(a) != 2 || len(b) != queuedB {
		t.Fatalf("after a second round: survey-a runs %v, survey-b %v", a, b)
	}

	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`project_jobs{project="survey-a",state="IN_PROGRESS"} 2`,
		`project_jobs{project="survey-a",state="QUEUED"} 998`,
		`project_jobs{project="survey-b",state="IN_PROGRESS"} 5`,
		`store_scrape_errors 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), `project_jobs{project="survey-b",state="QUEUED"}`) {
		t.Errorf("/metrics shows queued jobs of survey-b, which has none")
	}
}

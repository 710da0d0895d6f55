package main

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/e2e"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// apiBinary is the real edgecoord binary serving the HTTP API, with a
// client that checks every exchange against docs/openapi.yaml.
type apiBinary struct {
	*e2e.Coordinator
	client *http.Client
}

func startAPIBinary(t *testing.T, env *e2e.Env) *apiBinary {
	t.Helper()
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "api-test", API: true, LogLevel: "debug", Extra: `
lease:
  reap_interval: 200ms
agents:
  offline_after: 2s
api:
  max_body_bytes: 4KiB
  rate: 2
  burst: 100
`})
	return &apiBinary{Coordinator: c, client: apitest.Client(t)}
}

type httpReply struct {
	status int
	header http.Header
	body   []byte
}

func (r httpReply) into(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (b *apiBinary) call(t *testing.T, method, path, token, body string, hdr ...string) httpReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpReply{resp.StatusCode, resp.Header, data}
}

// TestAPIBinary drives the real edgecoord binary (PostgreSQL, NATS) over
// HTTP only: tokens made with the CLI, submit, show, list with pages,
// cancel, a fan-out to 3 phones submitted twice with one Idempotency-Key
// (3 jobs, not 6), another project's job refused and recorded, a
// read-only token that cannot cancel, problem documents, 401 and 429, and
// no token in any line the coordinator logs.
func TestAPIBinary(t *testing.T) {
	t.Parallel()
	env := e2e.NewEnv(t)
	ns := env.NATS()
	b := startAPIBinary(t, env)

	// Jobs whose id starts with "hold" are held by the agent until revoked.
	behavior := func(tok fencing.Token) coordtest.Behavior {
		if strings.HasPrefix(tok.JobID, "hold") {
			return coordtest.Hold
		}
		return coordtest.Finish
	}
	phone := func(serial string) protocol.Device {
		return protocol.Device{Serial: serial, State: protocol.DeviceReady, Model: "Pixel 7", Tags: []string{"lab"}}
	}
	pc1 := coordtest.Start(t, coordtest.Options{ID: "pc-1", URL: ns.ClientURL(), Devices: []protocol.Device{phone("P1"), phone("P2")}, Slots: 2, Behavior: behavior})
	coordtest.Start(t, coordtest.Options{ID: "pc-2", URL: ns.ClientURL(), Devices: []protocol.Device{phone("P3"), {Serial: "P4", State: "unauthorized", Model: "Pixel 7"}}, Slots: 2, Behavior: behavior})

	alice := b.Token(t, "alice", "lab", "read,submit,operate")
	bob := b.Token(t, "bob", "other", "read,submit,operate")
	reader := b.Token(t, "rita", "lab", "read")
	admin := b.Token(t, "ops", "lab", "read,admin")
	tokens := []string{alice, bob, reader, admin}

	testenv.Eventually(t, 10*time.Second, "both agents listed as online with their phones", func() bool {
		var l api.AgentList
		b.call(t, "GET", "/api/v1/agents", reader, "").into(t, &l)
		online := 0
		for _, a := range l.Agents {
			if a.Online && len(a.Phones) == 2 {
				online++
			}
		}
		return online == 2
	})

	show := func(id string) api.JobDetail {
		t.Helper()
		r := b.call(t, "GET", "/api/v1/jobs/"+id, alice, "")
		if r.status != 200 {
			t.Fatalf("show %s: %d %s", id, r.status, r.body)
		}
		var d api.JobDetail
		r.into(t, &d)
		return d
	}

	t.Run("submit and show", func(t *testing.T) {
		r := b.call(t, "POST", "/api/v1/jobs", alice, `{"device": {"serial": "P3"}, "steps": [{"op": "launch", "package": "com.example"}, {"op": "screenshot", "name": "home.png"}], "timeout": "90s"}`)
		var j api.JobView
		r.into(t, &j)
		if r.status != 201 || j.ID == "" || j.Status != jobstore.StatusQueued || j.Project != "lab" || j.SubmittedBy != "alice" {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		testenv.Eventually(t, 10*time.Second, "the job succeeded", func() bool { return show(j.ID).Status == jobstore.StatusSucceeded })
		d := show(j.ID)
		if len(d.Generations) != 1 || !strings.HasPrefix(d.Generations[0].Owner, "pc-2/") || d.Generations[0].Ended != "succeeded" || d.Task.TimeoutMS != 90000 {
			t.Errorf("generations of a succeeded job: %+v", d.Generations)
		}
		verbs := []string{}
		for _, e := range d.WriteEvents {
			verbs = append(verbs, e.Verb)
		}
		if !slices.Contains(verbs, "claim") || !slices.Contains(verbs, "result") {
			t.Errorf("write events %v", verbs)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		r := b.call(t, "POST", "/api/v1/jobs", alice, `{"id": "hold-1", "device": {"serial": "P1"}, "steps": [{"op": "wait", "duration_ms": 10}]}`)
		if r.status != 201 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		testenv.Eventually(t, 10*time.Second, "hold-1 running on pc-1", func() bool { return show("hold-1").Status == jobstore.StatusInProgress })
		// A read-only token cannot cancel.
		r = b.call(t, "POST", "/api/v1/jobs/hold-1/cancel", reader, "")
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "lacks scope operate") {
			t.Fatalf("read-only cancel: %d %s", r.status, r.body)
		}
		if st := show("hold-1").Status; st != jobstore.StatusInProgress {
			t.Fatalf("after a refused cancel the job is %s", st)
		}
		r = b.call(t, "POST", "/api/v1/jobs/hold-1/cancel", alice, `{"reason": "not needed"}`)
		var j api.JobView
		r.into(t, &j)
		if r.status != 200 || !jobstore.Finished(j.Status) {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		testenv.Eventually(t, 10*time.Second, "pc-1 revoked hold-1", func() bool {
			return slices.ContainsFunc(pc1.Revokes(), func(rv protocol.Revoke) bool { return rv.Token.JobID == "hold-1" })
		})
		if g := show("hold-1").Generations; len(g) != 1 || g[0].Ended != "cancelled" || g[0].Detail != "not needed" {
			t.Errorf("generations after cancel: %+v", g)
		}
	})

	t.Run("fan-out with an idempotency key", func(t *testing.T) {
		body := `{"fan_out": true, "device": {"model": "Pixel 7", "tags": ["lab"]}, "steps": [{"op": "screenshot", "name": "s.png"}]}`
		var first, second api.BatchView
		r := b.call(t, "POST", "/api/v1/jobs", alice, body, "Idempotency-Key", "nightly-42")
		r.into(t, &first)
		if r.status != 201 || len(first.Jobs) != 3 {
			t.Fatalf("fan-out: %d %s", r.status, r.body)
		}
		r = b.call(t, "POST", "/api/v1/jobs", alice, body, "Idempotency-Key", "nightly-42")
		r.into(t, &second)
		if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || second.Batch != first.Batch {
			t.Fatalf("retry: %d %s", r.status, r.body)
		}
		var serials []string
		for i, j := range first.Jobs {
			if second.Jobs[i].ID != j.ID || j.Status == "" {
				t.Errorf("retry returned %s for %s", second.Jobs[i].ID, j.ID)
			}
			serials = append(serials, j.Selector.Serial)
		}
		if strings.Join(serials, ",") != "P1,P2,P3" {
			t.Errorf("fan-out phones %v, want P1,P2,P3 (P4 is unauthorized)", serials)
		}
		// 3 jobs, not 6: the batch's jobs are all there is of it.
		store, err := pgstore.OpenExisting(t.Context(), b.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		all, err := store.ListJobs(t.Context(), jobstore.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range all {
			if strings.HasPrefix(j.ID, first.Batch+"-") {
				n++
			}
		}
		if n != 3 {
			t.Fatalf("a fan-out to 3 phones submitted twice made %d jobs, want 3", n)
		}
		for _, j := range first.Jobs {
			testenv.Eventually(t, 10*time.Second, j.ID+" succeeded on its phone", func() bool {
				d := show(j.ID)
				return d.Status == jobstore.StatusSucceeded && d.Phone == j.Selector.Serial
			})
		}
		r = b.call(t, "POST", "/api/v1/jobs", alice, strings.Replace(body, "s.png", "t.png", 1), "Idempotency-Key", "nightly-42")
		if r.status != 422 || !strings.Contains(string(r.body), api.ProblemIdempotency) {
			t.Errorf("same key, other body: %d %s", r.status, r.body)
		}
	})

	t.Run("cli submits a fan-out through the same code", func(t *testing.T) {
		file := writeFile(t, "fan.yaml", "project: lab\nfan_out: true\ndevice:\n  tags: [lab]\nsteps:\n  - op: wait\n")
		out, errOut, code := b.CLI(t, "job", "submit", "-f", file, "--json")
		var batch struct {
			Batch string `json:"batch"`
			Jobs  []struct {
				ID       string                  `json:"id"`
				Status   string                  `json:"status"`
				Selector protocol.DeviceSelector `json:"selector"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(out), &batch); code != 0 || err != nil || len(batch.Jobs) != 3 || batch.Batch == "" {
			t.Fatalf("job submit of a fan-out: exit %d, %q %q (%v)", code, out, errOut, err)
		}
		d := show(batch.Jobs[0].ID)
		if d.SubmittedBy != "cli" || d.Project != "lab" || d.Selector.Serial != "P1" {
			t.Errorf("job of a cli fan-out: %+v", d.JobView)
		}
		file = writeFile(t, "bad.yaml", "steps:\n  - op: dance\n")
		if _, errOut, code := b.CLI(t, "job", "submit", "-f", file); code != 2 || !strings.Contains(errOut, "steps[0]: op: unknown op") {
			t.Errorf("job submit of an unknown op: exit %d, %q", code, errOut)
		}
	})

	t.Run("list with pages", func(t *testing.T) {
		var want []string
		page, err := func() (jobstore.JobPage, error) {
			store, err := pgstore.OpenExisting(t.Context(), b.DSN)
			if err != nil {
				return jobstore.JobPage{}, err
			}
			defer store.Close()
			return store.ListJobPage(t.Context(), jobstore.JobPageFilter{Projects: []string{"lab"}, Limit: 500})
		}()
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			want = append(want, j.ID)
		}
		if len(want) < 5 {
			t.Fatalf("only %d jobs in project lab", len(want))
		}
		var got []string
		path := "/api/v1/jobs?project=lab&limit=2"
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatal("pagination does not end")
			}
			r := b.call(t, "GET", path, reader, "")
			var l api.JobList
			r.into(t, &l)
			if r.status != 200 || len(l.Jobs) > 2 {
				t.Fatalf("list: %d %s", r.status, r.body)
			}
			for _, j := range l.Jobs {
				if j.ID == "" || j.Status == "" {
					t.Errorf("listed job without id or status: %+v", j)
				}
				got = append(got, j.ID)
			}
			if pages == 0 {
				// A submit between two pages does not move them.
				b.call(t, "POST", "/api/v1/jobs", alice, `{"device": {"serial": "P9"}, "steps": [{"op": "wait"}]}`)
			}
			if l.NextCursor == "" {
				break
			}
			path = "/api/v1/jobs?project=lab&limit=2&cursor=" + l.NextCursor
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("pages gave\n%v\nwant\n%v", got, want)
		}
		var l api.JobList
		b.call(t, "GET", "/api/v1/jobs?phone=P1&status=succeeded,cancelled,failed", reader, "").into(t, &l)
		for _, j := range l.Jobs {
			if j.Selector.Serial != "P1" && j.Phone != "P1" {
				t.Errorf("phone=P1 listed %+v", j)
			}
		}
		if len(l.Jobs) < 2 {
			t.Errorf("phone=P1: %d jobs", len(l.Jobs))
		}
	})

	t.Run("another project's job", func(t *testing.T) {
		// bob's token (project other) gets 403 for a job of
		// project lab, and the attempt is recorded.
		r := b.call(t, "GET", "/api/v1/jobs/hold-1", bob, "")
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), api.ProblemForbidden) {
			t.Fatalf("bob shows hold-1: %d %s", r.status, r.body)
		}
		r = b.call(t, "POST", "/api/v1/jobs/hold-1/cancel", bob, "")
		if r.status != http.StatusForbidden {
			t.Fatalf("bob cancels hold-1: %d %s", r.status, r.body)
		}
		var l api.JobList
		b.call(t, "GET", "/api/v1/jobs", bob, "").into(t, &l)
		if len(l.Jobs) != 0 {
			t.Errorf("bob lists %d jobs of other projects", len(l.Jobs))
		}
		store, err := pgstore.OpenExisting(t.Context(), b.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		ds, err := store.APIDenials(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// Counted per token, kind and minute; a row keeps the last request.
		var n int64
		for _, d := range ds {
			if d.TokenName != "bob" || d.Kind != jobstore.DenialJob || d.JobID != "hold-1" || d.Project != "lab" || d.At.IsZero() {
				t.Fatalf("recorded denials %+v", ds)
			}
			n += d.Count
		}
		if last := ds[len(ds)-1]; n != 2 || last.Method != "POST" || last.Route != "/api/v1/jobs/hold-1/cancel" {
			t.Fatalf("recorded denials %+v", ds)
		}
	})

	t.Run("agents", func(t *testing.T) {
		r := b.call(t, "POST", "/api/v1/agents/pc-2/drain", alice, "")
		if r.status != http.StatusForbidden {
			t.Errorf("drain without admin: %d %s", r.status, r.body)
		}
		var a api.AgentView
		r = b.call(t, "POST", "/api/v1/agents/pc-2/drain", admin, "")
		r.into(t, &a)
		if r.status != 200 || !a.Draining {
			t.Fatalf("drain: %d %s", r.status, r.body)
		}
		r = b.call(t, "POST", "/api/v1/agents/pc-2/resume", admin, "")
		r.into(t, &a)
		if r.status != 200 || a.Draining {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
	})

	t.Run("problems", func(t *testing.T) {
		for _, c := range []struct {
			body, field string
			status      int
		}{
			{`{"steps": [{"op": "wait"}], "colour": "red"}`, "colour", 400},
			{`{"steps": [{"op": "tap", "x": "ten", "y": 1}]}`, "steps.x", 400},
			{`{"steps": [{"op": "wait"}, {"op": "dance"}]}`, "steps[1].op", 422},
			{`{"device": {"tags": [""]}, "steps": [{"op": "wait"}]}`, "device.tags[0]", 422},
			{`{"steps": [{"op": "text", "text": "` + strings.Repeat("a", 5000) + `"}]}`, "", 413},
		} {
			r := b.call(t, "POST", "/api/v1/jobs", alice, c.body)
			var p api.Problem
			r.into(t, &p)
			if r.status != c.status || p.Field != c.field || r.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%.60s: %d %s; want %d naming %q", c.body, r.status, r.body, c.status, c.field)
			}
		}
	})

	t.Run("401", func(t *testing.T) {
		old := b.Token(t, "old", "lab", "read")
		if r := b.call(t, "GET", "/api/v1/jobs", old, ""); r.status != 200 {
			t.Fatalf("new token: %d", r.status)
		}
		if out, _, code := b.CLI(t, "token", "revoke", "old"); code != 0 || !strings.Contains(out, "revoked") {
			t.Fatalf("token revoke: %d %q", code, out)
		}
		for name, tok := range map[string]string{"none": "", "unknown": api.TokenPrefix + "nope", "revoked": old} {
			if r := b.call(t, "GET", "/api/v1/jobs", tok, ""); r.status != http.StatusUnauthorized {
				t.Errorf("%s token: %d %s", name, r.status, r.body)
			}
		}
		out, _, code := b.CLI(t, "token", "list", "--json")
		var list []struct {
			Name      string     `json:"name"`
			RevokedAt *time.Time `json:"revoked_at"`
			LastUsed  *time.Time `json:"last_used_at"`
		}
		if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 5 {
			t.Fatalf("token list: %d %q %v", code, out, err)
		}
		if list[4].Name != "old" || list[4].RevokedAt == nil || list[0].LastUsed == nil {
			t.Errorf("token list %s", out)
		}
		text, _, _ := b.CLI(t, "token", "list")
		for _, tok := range append(tokens, old) {
			if strings.Contains(out+text, tok) {
				t.Error("token list prints a token")
			}
		}
	})

	t.Run("429", func(t *testing.T) {
		flood := b.Token(t, "flood", "lab", "read")
		for i := range 400 {
			r := b.call(t, "GET", "/api/v1/agents", flood, "")
			if r.status == http.StatusTooManyRequests {
				if r.header.Get("Retry-After") == "" || i < 100 {
					t.Errorf("429 after %d requests (burst 100), Retry-After %q", i, r.header.Get("Retry-After"))
				}
				// Another token is not limited by this one's requests.
				if r := b.call(t, "GET", "/api/v1/agents", reader, ""); r.status != 200 {
					t.Errorf("another token: %d", r.status)
				}
				return
			}
		}
		t.Fatal("400 requests at once were never limited")
	})

	// Graceful shutdown, then no token in anything the coordinator logged.
	b.MustCleanShutdown(t)
	logs := b.Log()
	if !strings.Contains(logs, "api request") || !strings.Contains(logs, `"token_name":"alice"`) {
		t.Errorf("the debug log has no request lines naming their token")
	}
	for _, tok := range tokens {
		if strings.Contains(logs, tok) || strings.Contains(logs, tok[len(api.TokenPrefix):len(api.TokenPrefix)+16]) {
			t.Errorf("the coordinator logged a token")
		}
	}
}

package coordinator_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestReassignedHolderObservationsRefused: a job reassigned mid-run. The
// old holder's late result with observations is refused (409, its
// write_events row accepted=false), its observations kept labelled
// refused; a result of the new holder with an invalid observation is
// answered 400 naming the field and stores nothing; its valid result is
// accepted, and only the new generation's rows are listed and exported
// unless generations=all is asked for. On both stores.
func TestReassignedHolderObservationsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		store func(t *testing.T) jobstore.Store
	}{
		{"sqlite", func(t *testing.T) jobstore.Store { return openSQLite(t) }},
		{"postgres", func(t *testing.T) jobstore.Store { return openPostgres(t, testenv.Postgres(t)) }},
	} {
		t.Run(c.name, func(t *testing.T) { testReassignedHolderObservations(t, c.store(t)) })
	}
}

func testReassignedHolderObservations(t *testing.T, store jobstore.Store) {
	ns := testenv.NATS(t)
	co := startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	hold := func(fencing.Token) coordtest.Behavior { return coordtest.Hold }
	a := coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")}, Behavior: hold})
	job := submit(t, store, "obs-fence", protocol.DeviceSelector{})
	waitAssign(t, a, job.ID, 10*time.Second)
	tokA := a.Assigns()[0]

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := coordtest.Start(t, coordtest.Options{ID: "pc-b", URL: ns.ClientURL(), Devices: []protocol.Device{phone("B1")}, Behavior: hold})
	testenv.Eventually(t, 10*time.Second, "reassigned to pc-b", func() bool {
		_, err := co.srv.Reassign(ctx, job.ID, "pc-b", true)
		return err == nil
	})
	waitAssign(t, b, job.ID, 10*time.Second)
	tokB := b.Assigns()[0]
	if tokB.Generation != tokA.Generation+1 {
		t.Fatalf("tokens %v then %v", tokA, tokB)
	}

	obs := func(value string) []protocol.Observation {
		return []protocol.Observation{{Step: 2, Name: "price", Raw: "¥" + value, Value: value, Parse: protocol.ParsePrice, Currency: "JPY",
			ObservedAt: time.Now().UTC(), App: &protocol.AppVersion{Package: "com.example.shop", VersionName: "1.0"}}}
	}
	// The old holder's result arrives late.
	err := a.Request(ctx, protocol.VerbResult, protocol.Result{Token: tokA, Result: json.RawMessage(`{"price": 999}`), Observations: obs("999")}, &protocol.ResultReply{})
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("old holder's result: %v, want 409", err)
	}
	// The new holder's result with an invalid observation writes nothing.
	bad := obs("1000")
	bad[0].Raw = strings.Repeat("x", protocol.MaxObservedBytes+1)
	var pe *protocol.Error
	err = b.Request(ctx, protocol.VerbResult, protocol.Result{Token: tokB, Result: json.RawMessage(`{}`), Observations: bad}, &protocol.ResultReply{})
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Description, "observations[0].raw") {
		t.Fatalf("invalid observation: %v, want 400 naming observations[0].raw", err)
	}
	if j := getJob(t, store, job.ID); j.Status != jobstore.StatusInProgress {
		t.Fatalf("job after the invalid result: %s", j.Status)
	}
	var rep protocol.ResultReply
	if err := b.Request(ctx, protocol.VerbResult, protocol.Result{Token: tokB, Result: json.RawMessage(`{"price": 1000}`), Observations: obs("1000")}, &rep); err != nil || !rep.Accepted {
		t.Fatalf("new holder's result: %v %+v", err, rep)
	}

	evs, err := store.WriteEvents(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	var refusedEvent int64
	for _, e := range evs {
		if e.Verb == jobstore.VerbResult {
			results = append(results, e.Owner+map[bool]string{true: " accepted", false: " refused"}[e.Accepted])
			if !e.Accepted {
				refusedEvent = e.ID
			}
		}
	}
	if want := []string{tokA.Owner + " refused", tokB.Owner + " accepted"}; !slices.Equal(results, want) {
		t.Fatalf("result write events %v, want %v (the invalid one records none)", results, want)
	}
	if got := metricValue(t, co.srv.Registry(), "stale_token_rejected_total", map[string]string{"verb": "result"}); got != 1 {
		t.Fatalf("stale_token_rejected_total{verb=result} = %v", got)
	}

	// What researchers get: the API over the same store.
	h, err := api.New(api.Options{Store: store, OfflineAfter: time.Hour, Rate: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	secret, hash, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.(jobstore.APIStore).CreateAPIToken(ctx, jobstore.APIToken{Name: "rita", Hash: hash, Projects: []string{jobstore.DefaultProject}, Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	client := apitest.Client(t)
	get := func(query string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/projects/default/observations"+query, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v %s", query, resp.StatusCode, err, body)
		}
		return body
	}
	var page api.ObservationPage
	if err := json.Unmarshal(get(""), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Observations) != 1 {
		t.Fatalf("listed %+v, want the new generation's row only", page.Observations)
	}
	if o := page.Observations[0]; o.Generation != tokB.Generation || o.Owner != tokB.Owner || o.AgentID != "pc-b" || o.Value != "1000" || !o.Accepted {
		t.Fatalf("listed %+v", o)
	}
	recs, err := csv.NewReader(bytes.NewReader(get("?format=csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(api.ObservationColumns, name) }
	if len(recs) != 2 || recs[1][col("generation")] != "2" || recs[1][col("value")] != "1000" || recs[1][col("accepted")] != "true" {
		t.Fatalf("exported %q, want the new generation's row only", recs)
	}
	if err := json.Unmarshal(get("?generations=all"), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Observations) != 2 {
		t.Fatalf("generations=all listed %+v", page.Observations)
	}
	old := page.Observations[0]
	if old.Generation != tokA.Generation || old.Owner != tokA.Owner || old.Value != "999" || old.Accepted || old.WriteEventID != refusedEvent {
		t.Fatalf("the old holder's row %+v, want refused at write event %d", old, refusedEvent)
	}
}

package securitytest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// fencedBody returns a well-formed request body of a fenced verb carrying
// tok, so that only the token decides the answer.
func fencedBody(verb string, tok fencing.Token, result string) any {
	sum := strings.Repeat("0f", 32)
	switch verb {
	case protocol.VerbRenew:
		return protocol.Renew{Token: tok}
	case protocol.VerbUpload:
		return protocol.Upload{Token: tok, Name: "forged.png", Size: 5, ContentType: "image/png", SHA256: sum}
	case protocol.VerbArtifact:
		return protocol.Artifact{Token: tok, Name: "forged.png", Key: tok.ObjectKey("forged.png"), Size: 5, SHA256: sum, ContentType: "image/png"}
	case protocol.VerbResult:
		return protocol.Result{Token: tok, Result: json.RawMessage(result)}
	case protocol.VerbFail:
		return protocol.Fail{Token: tok, Reason: "forged", Requeue: true}
	}
	panic(verb)
}

var allFenced = []string{protocol.VerbRenew, protocol.VerbUpload, protocol.VerbArtifact, protocol.VerbResult, protocol.VerbFail}

// tokenLab is a coordinator on the NATS permissions of
// examples/nats-server.conf with two agents that hold one job each.
type tokenLab struct {
	t      *testing.T
	store  jobstore.Store
	srv    *coordinator.Server
	a, b   *coordtest.Agent
	tokA   fencing.Token
	tokB   fencing.Token
	ctx    context.Context
	stale  float64 // expected stale_token_rejected_total
	forbid float64 // expected forbidden_requests_total
}

func newTokenLab(t *testing.T, store jobstore.Store) *tokenLab {
	ns := natsFromExample(t, "coord-pw-t1", "kitchen-pw-t2", "garage-pw-t3")
	url := ns.ClientURL()
	// Uploads are authorised (fenced) before anything is signed; signing
	// needs no request to the storage server.
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{Endpoint: "127.0.0.1:9", Region: "us-east-1", Bucket: "artifacts", AccessKey: "k", SecretKey: "presign-only-key"})
	if err != nil {
		t.Fatal(err)
	}
	srv := runCoordinator(t, url, store, coordinator.Options{ID: "c1", LeaseTTL: time.Minute, OfflineAfter: 5 * time.Second, Presigner: p, Log: zerolog.Nop()},
		nats.UserInfo("edgecoord", "coord-pw-t1"))
	hold := func(fencing.Token) coordtest.Behavior { return coordtest.Hold }
	// A has room for a second job: job-b is moved to it below while its
	// first job is still winding down on its side.
	a := coordtest.Start(t, coordtest.Options{ID: "pc-kitchen", URL: url, Behavior: hold, Slots: 2,
		Devices: []protocol.Device{{Serial: "K1", State: protocol.DeviceReady}},
		NATS:    []nats.Option{nats.UserInfo("pc-kitchen", "kitchen-pw-t2")}})
	b := coordtest.Start(t, coordtest.Options{ID: "pc-garage", URL: url, Behavior: hold,
		Devices: []protocol.Device{{Serial: "G1", State: protocol.DeviceReady}},
		NATS:    []nats.Option{nats.UserInfo("pc-garage", "garage-pw-t3")}})
	l := &tokenLab{t: t, store: store, srv: srv, a: a, b: b, ctx: context.Background()}
	for id, serial := range map[string]string{"job-a": "K1", "job-b": "G1"} {
		task := protocol.Task{Device: protocol.DeviceSelector{Serial: serial}, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
		if _, err := store.Submit(l.ctx, jobstore.JobSpec{ID: id, Task: task}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "both jobs assigned", func() bool { return len(a.Assigns()) == 1 && len(b.Assigns()) == 1 })
	l.tokA, l.tokB = a.Assigns()[0], b.Assigns()[0]
	if l.tokA.JobID != "job-a" || l.tokB.JobID != "job-b" {
		t.Fatalf("assigned %v and %v", l.tokA, l.tokB)
	}
	return l
}

// attempt sends verb with tok on the subject of ag and checks the answer:
// the protocol error code want, one more refused write_events row for the
// token (for 403, one more refusal counted under ag instead), and the
// metrics.
func (l *tokenLab) attempt(ag *coordtest.Agent, verb string, tok fencing.Token, result string, want int) {
	l.t.Helper()
	before := l.events(tok, verb)
	refusedBefore := l.refusals(ag.ID(), verb)
	err := ag.Request(l.ctx, verb, fencedBody(verb, tok, result), nil)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != want {
		l.t.Fatalf("%s by %s with %v: %v, want %d", verb, ag.ID(), tok, err, want)
	}
	after := l.events(tok, verb)
	if want == protocol.CodeForbidden {
		l.forbid++
		rs := l.refusalRows(ag.ID(), verb)
		if len(after) != len(before) || l.refusals(ag.ID(), verb) != refusedBefore+1 || len(rs) == 0 {
			l.t.Fatalf("%s by %s with %v refused 403 but counted %d refusals, %d write events", verb, ag.ID(), tok,
				l.refusals(ag.ID(), verb)-refusedBefore, len(after)-len(before))
		}
		r := rs[len(rs)-1]
		if r.Owner != tok.Owner || r.Generation != tok.Generation || !strings.HasPrefix(r.Detail, "forbidden:") || !strings.Contains(r.Detail, ag.ID()) {
			l.t.Fatalf("403 counted as %+v", r)
		}
		return
	}
	if len(after) != len(before)+1 {
		l.t.Fatalf("%s by %s with %v refused %d but recorded %d new attempts", verb, ag.ID(), tok, want, len(after)-len(before))
	}
	e := after[len(after)-1]
	if e.Accepted || e.Owner != tok.Owner || e.Generation != tok.Generation {
		l.t.Fatalf("recorded %+v for the refused %s with %v", e, verb, tok)
	}
	if want == protocol.CodeStale {
		l.stale++
	}
}

// refusalRows returns the rows of refusals counted under agent on verb.
func (l *tokenLab) refusalRows(agent, verb string) []jobstore.AgentRefusal {
	l.t.Helper()
	rs, err := l.store.AgentRefusals(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []jobstore.AgentRefusal
	for _, r := range rs {
		if r.AgentID == agent && r.Verb == verb {
			out = append(out, r)
		}
	}
	return out
}

// refusals counts the refusals counted under agent on verb.
func (l *tokenLab) refusals(agent, verb string) int64 {
	var n int64
	for _, r := range l.refusalRows(agent, verb) {
		n += r.Count
	}
	return n
}

// events returns the recorded attempts of verb with tok's owner and
// generation on tok's job.
func (l *tokenLab) events(tok fencing.Token, verb string) []jobstore.WriteEvent {
	l.t.Helper()
	evs, err := l.store.WriteEvents(l.ctx, tok.JobID)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []jobstore.WriteEvent
	for _, e := range evs {
		if e.Verb == verb && e.Owner == tok.Owner && e.Generation == tok.Generation {
			out = append(out, e)
		}
	}
	return out
}

func (l *tokenLab) job(id string) jobstore.Job {
	l.t.Helper()
	j, err := l.store.Get(l.ctx, id)
	if err != nil {
		l.t.Fatal(err)
	}
	return j
}

func (l *tokenLab) checkMetrics() {
	l.t.Helper()
	if got := metricSum(l.t, l.srv.Registry(), "stale_token_rejected_total"); got != l.stale {
		l.t.Errorf("stale_token_rejected_total = %v, want %v", got, l.stale)
	}
	if got := metricSum(l.t, l.srv.Registry(), "forbidden_requests_total"); got != l.forbid {
		l.t.Errorf("forbidden_requests_total = %v, want %v", got, l.forbid)
	}
}

func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestForgedAndReplayedTokens: on both stores, over NATS with per-agent
// credentials, every fenced verb (renew, upload, artifact, result, fail)
// refuses a token with a forged generation, a token of an earlier process of
// the same agent, a token for another agent's job presented by this agent
// (409), and another agent's token on this agent's subject (403). Once a
// result is accepted, the same result sent again by its token is answered
// as the first time and written no more, while another result under that
// token and every other verb are refused (409); the accepted result stays.
// After a reassignment the old owner's replays are refused, and so is the
// new owner's use of the old generation. Every attempt is recorded in
// write_events, every refusal counted.
func TestForgedAndReplayedTokens(t *testing.T) {
	for _, st := range []struct {
		name string
		open func(*testing.T) jobstore.Store
	}{{"sqlite", openSQLite}, {"postgres", openPostgres}} {
		t.Run(st.name, func(t *testing.T) {
			l := newTokenLab(t, st.open(t))
			a, b, tokA, tokB := l.a, l.b, l.tokA, l.tokB

			forged := []struct {
				what string
				tok  fencing.Token
				want int
			}{
				{"a generation not granted yet", fencing.Token{JobID: tokA.JobID, Owner: tokA.Owner, Generation: tokA.Generation + 1}, protocol.CodeStale},
				{"a far-future generation", fencing.Token{JobID: tokA.JobID, Owner: tokA.Owner, Generation: 1 << 62}, protocol.CodeStale},
				{"an earlier process of the same agent", fencing.Token{JobID: tokA.JobID, Owner: fencing.Owner("pc-kitchen", "0000000000000000"), Generation: tokA.Generation}, protocol.CodeStale},
				{"another agent's job with this agent as owner", fencing.Token{JobID: tokB.JobID, Owner: tokA.Owner, Generation: tokB.Generation}, protocol.CodeStale},
				{"a job that does not exist", fencing.Token{JobID: "job-none", Owner: tokA.Owner, Generation: 1}, protocol.CodeUnknownJob},
				{"another agent's token", tokB, protocol.CodeForbidden},
				{"this agent's job with another agent as owner", fencing.Token{JobID: tokA.JobID, Owner: "pc-garage/forged", Generation: tokA.Generation}, protocol.CodeForbidden},
			}
			for _, f := range forged {
				for _, verb := range allFenced {
					t.Logf("%s: %s", f.what, verb)
					l.attempt(a, verb, f.tok, `{"forged":true}`, f.want)
				}
			}
			// A token that is not even well formed never reaches the store:
			// 400, not recorded.
			for _, bad := range []fencing.Token{{JobID: tokA.JobID, Owner: tokA.Owner}, {JobID: tokA.JobID, Owner: tokA.Owner, Generation: -1}, {JobID: tokA.JobID, Owner: "pc-kitchen"}} {
				if err := a.Request(l.ctx, protocol.VerbResult, protocol.Result{Token: bad, Result: []byte(`{}`)}, nil); !errors.Is(err, protocol.ErrBadRequest) {
					t.Fatalf("result with malformed token %v: %v, want 400", bad, err)
				}
			}
			for id, tok := range map[string]fencing.Token{"job-a": tokA, "job-b": tokB} {
				if j := l.job(id); j.Status != jobstore.StatusInProgress || j.WorkerID != tok.Owner || j.Generation != tok.Generation {
					t.Fatalf("forgeries changed %s: %+v", id, j)
				}
			}

			// A finishes its job. The accepted result sent again by its token
			// (a retry whose reply was lost) is answered as the first time
			// and written no more; another result under that token, and
			// every other verb, are refused; nothing changes.
			var rep protocol.ResultReply
			if err := a.Request(l.ctx, protocol.VerbResult, protocol.Result{Token: tokA, Result: []byte(`{"by":"A","n":1}`)}, &rep); err != nil || !rep.Accepted {
				t.Fatalf("A's own result: %+v, %v", rep, err)
			}
			accepted := l.job("job-a")
			before := len(l.events(tokA, protocol.VerbResult))
			var again protocol.ResultReply
			if err := a.Request(l.ctx, protocol.VerbResult, protocol.Result{Token: tokA, Result: []byte(`{"n": 1, "by": "A"}`)}, &again); err != nil || !again.Accepted || !slices.Equal(again.Manifest, rep.Manifest) {
				t.Fatalf("the accepted result sent again: %+v, %v; want the first reply %+v", again, err, rep)
			}
			if evs := l.events(tokA, protocol.VerbResult); len(evs) != before+1 || evs[len(evs)-1].Accepted {
				t.Fatalf("the resent result was not recorded as an attempt that wrote nothing: %+v", evs)
			}
			l.attempt(a, protocol.VerbResult, tokA, `{"by":"A","n":2}`, protocol.CodeStale)
			for _, verb := range []string{protocol.VerbRenew, protocol.VerbUpload, protocol.VerbArtifact, protocol.VerbFail} {
				l.attempt(a, verb, tokA, "", protocol.CodeStale)
			}
			if j := l.job("job-a"); j.Status != jobstore.StatusSucceeded || string(j.Result) != string(accepted.Result) || j.CompletedBy != tokA.Owner {
				t.Fatalf("replays changed the accepted job: %+v (was %+v)", j, accepted)
			}
			if n := countAccepted(l.events(tokA, protocol.VerbResult)); n != 1 {
				t.Fatalf("%d accepted results for job-a", n)
			}

			// B's job moves to A (generation + 1). B's replays of its own,
			// once accepted, renewal and everything else are refused; A cannot
			// use the old generation although it is now the owner.
			if _, err := l.srv.Reassign(l.ctx, "job-b", "pc-kitchen", true); err != nil {
				t.Fatalf("reassign: %v", err)
			}
			testenv.Eventually(t, 10*time.Second, "A to take job-b", func() bool { return len(a.Assigns()) == 2 })
			tokB2 := a.Assigns()[1]
			if tokB2.JobID != "job-b" || tokB2.Generation != tokB.Generation+1 || tokB2.Owner != tokA.Owner {
				t.Fatalf("reassigned token %v", tokB2)
			}
			if n := countAccepted(l.events(tokB, protocol.VerbRenew)); n == 0 {
				t.Fatal("B never renewed: the replay below would prove nothing")
			}
			for _, verb := range allFenced {
				l.attempt(b, verb, tokB, `{"by":"B"}`, protocol.CodeStale)
			}
			oldGen := fencing.Token{JobID: "job-b", Owner: tokA.Owner, Generation: tokB.Generation}
			for _, verb := range allFenced {
				l.attempt(a, verb, oldGen, `{"by":"A, old generation"}`, protocol.CodeStale)
			}
			// B cannot act on A's new token either, from its own subject.
			l.attempt(b, protocol.VerbResult, tokB2, `{"by":"B"}`, protocol.CodeForbidden)
			if j := l.job("job-b"); j.Status != jobstore.StatusInProgress || j.WorkerID != tokB2.Owner || j.Generation != tokB2.Generation {
				t.Fatalf("job-b after the replays: %+v", j)
			}
			if err := a.Request(l.ctx, protocol.VerbResult, protocol.Result{Token: tokB2, Result: []byte(`{"by":"A"}`)}, &rep); err != nil || !rep.Accepted {
				t.Fatalf("the current owner's result: %+v, %v", rep, err)
			}
			l.checkMetrics()
			t.Logf("%v refusals as stale (409), %v as forbidden (403), each recorded in write_events", l.stale, l.forbid)
		})
	}
}

func countAccepted(evs []jobstore.WriteEvent) int {
	n := 0
	for _, e := range evs {
		if e.Accepted {
			n++
		}
	}
	return n
}

package coordinator_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// handlerFuzz is a coordinator on an embedded NATS server and an SQLite
// store with one job in progress under a known token, reached through the
// public surface: NATS requests on edge.v1.coord.<agent_id>.<verb>.
type handlerFuzz struct {
	nc     *nats.Conn
	store  sqlstore.Lab
	serial string // the selector of every job: no phone ever matches it
	n      int
	cur    fencing.Token // the job in progress
}

const fuzzOwner = "pc-a/boot-1"

// next makes a fresh job in progress under fuzzOwner at generation 1 and
// ends the previous one.
func (h *handlerFuzz) next(t testing.TB) {
	ctx := context.Background()
	if h.cur.JobID != "" {
		if _, err := h.store.Cancel(ctx, h.cur.JobID, "fuzz: next job"); err != nil && !errors.Is(err, jobstore.ErrConflict) {
			t.Fatalf("cancel %s: %v", h.cur.JobID, err)
		}
	}
	h.n++
	id := fmt.Sprintf("job-%d", h.n)
	task := protocol.Task{Device: protocol.DeviceSelector{Serial: h.serial}, Steps: []protocol.Step{{Op: protocol.OpScreenshot, Name: "s.png"}}}
	if _, err := h.store.Submit(ctx, jobstore.JobSpec{ID: id, Task: task}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	l, err := h.store.Claim(ctx, id, fuzzOwner, time.Hour)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	h.cur = l.Token
}

// current reports whether the job of h.cur is still in progress under it.
func (h *handlerFuzz) current(t testing.TB) bool {
	j, err := h.store.Get(context.Background(), h.cur.JobID)
	if err != nil {
		t.Fatalf("get %s: %v", h.cur.JobID, err)
	}
	return j.Status == jobstore.StatusInProgress && j.WorkerID == h.cur.Owner && j.Generation == h.cur.Generation
}

// events counts the recorded attempts of verb with tok that were accepted
// or not.
func (h *handlerFuzz) events(t testing.TB, verb string, tok fencing.Token, accepted bool) (n int, forbidden int) {
	evs, err := h.store.WriteEvents(context.Background(), tok.JobID)
	if err != nil {
		t.Fatalf("write events of %q: %v", tok.JobID, err)
	}
	for _, e := range evs {
		if e.Verb == verb && e.Owner == tok.Owner && e.Generation == tok.Generation && e.Accepted == accepted {
			n++
			if strings.HasPrefix(e.Detail, "forbidden:") {
				forbidden++
			}
		}
	}
	return n, forbidden
}

// refusals counts the refused requests of agent on verb (agent_refusals).
func (h *handlerFuzz) refusals(t testing.TB, agent, verb string) int64 {
	rs, err := h.store.AgentRefusals(context.Background())
	if err != nil {
		t.Fatalf("agent refusals: %v", err)
	}
	var n int64
	for _, r := range rs {
		if r.AgentID == agent && r.Verb == verb {
			n += r.Count
		}
	}
	return n
}

// replayed reports whether body is a result of tok that the job had
// already accepted before this request: tok committed the job and the
// stored result is the body's.
func (h *handlerFuzz) replayed(t testing.TB, verb string, tok fencing.Token, body []byte) bool {
	if verb != protocol.VerbResult || tok == h.cur {
		return false
	}
	var r protocol.Result
	if json.Unmarshal(body, &r) != nil {
		return false
	}
	j, err := h.store.Get(context.Background(), tok.JobID)
	if err != nil || j.Status != jobstore.StatusSucceeded || j.CompletedBy != tok.Owner || j.Generation != tok.Generation {
		return false
	}
	value := func(m json.RawMessage) (any, bool) {
		if len(m) == 0 {
			return nil, true
		}
		d := json.NewDecoder(bytes.NewReader(m))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, false
		}
		return v, true
	}
	stored, ok1 := value(j.Result)
	sent, ok2 := value(r.Result)
	return ok1 && ok2 && reflect.DeepEqual(stored, sent)
}

// subjectToken turns arbitrary text into one token of a subject a client
// can publish on: no separators, wildcards, spaces or control characters.
// What remains may still be an invalid agent id ("a$b", "é", 65 letters).
func subjectToken(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	s = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f || r == '.' || r == '*' || r == '>' || r == 0xfffd {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(s, "_"))
	if s == "" {
		return "pc-a"
	}
	return s
}

var fencedVerbs = map[string]bool{
	protocol.VerbRenew: true, protocol.VerbUpload: true, protocol.VerbArtifact: true,
	protocol.VerbResult: true, protocol.VerbFail: true,
}

// FuzzHandlers sends arbitrary bodies on every verb's subject, for the agent
// that holds the job, another agent and arbitrary subject tokens. "$JOB" in
// a body stands for the id of the job in progress, whose token is
// {"job_id":"$JOB","owner":"pc-a/boot-1","generation":1}. Every request is
// answered, with a body or one of the protocol's error codes; a fenced verb
// succeeds only with the current token on its owner's subject, or, for a
// result, as the answer to a replay of the result its token committed;
// every 404 and 409 of a fenced verb is recorded in write_events, every
// 403 counted in agent_refusals, and every accepted write recorded too; the job's generation never moves but by a
// grant.
func FuzzHandlers(f *testing.F) {
	tok := `{"job_id":"$JOB","owner":"pc-a/boot-1","generation":1}`
	sum := strings.Repeat("ab", 32)
	seeds := []struct {
		verb  uint8
		agent string
		body  string
	}{
		{0, "pc-a", `{"boot_id":"boot-1","version":"v1","devices":[{"serial":"S1","state":"device"}],"slots":1}`},
		{0, "pc-a", `{"boot_id":"boot-2","slots":1,"draining":true}`},
		{0, "pc-b", `{"boot_id":"x","probe":true}`},
		{0, "pc-a", `{"boot_id":""}`},
		{1, "pc-a", `{"boot_id":"boot-1","running":[` + tok + `],"free":0}`},
		{1, "pc-z", `{"boot_id":"nope","free":1}`},
		{2, "pc-a", `{"token":` + tok + `}`},
		{2, "pc-a", `{"token":{"job_id":"$JOB","owner":"pc-a/boot-1","generation":2}}`},
		{2, "pc-a", `{"token":{"job_id":"$JOB","owner":"pc-a/boot-0","generation":1}}`},
		{2, "pc-b", `{"token":` + tok + `}`},
		{2, "pc-a", `{"token":{"job_id":"no-such-job","owner":"pc-a/boot-1","generation":1}}`},
		{2, "pc-a", `{"token":{"job_id":"$JOB","owner":"pc-a/boot-1","generation":0}}`},
		{3, "pc-a", `{"token":` + tok + `,"name":"s.png","size":5,"content_type":"image/png","sha256":"` + sum + `"}`},
		{3, "pc-a", `{"token":` + tok + `,"name":"../s.png","size":5,"sha256":"` + sum + `"}`},
		{3, "pc-a", `{"token":` + tok + `,"name":"s.png","size":-1,"content_type":"a\nb","sha256":"` + sum + `"}`},
		{4, "pc-a", `{"token":` + tok + `,"name":"s.png","key":"jobs/$JOB/g1/s.png","size":5,"sha256":"` + sum + `","content_type":"image/png"}`},
		{4, "pc-a", `{"token":` + tok + `,"name":"s.png","key":"jobs/other/g1/s.png"}`},
		{5, "pc-a", `{"token":` + tok + `,"result":{"ok":true}}`},
		{5, "pc-a", `{"token":` + tok + `}`},
		{5, "pc-a", `{"token":` + tok + `,"result":"\u0000"}`},
		{5, "pc-b", `{"token":{"job_id":"$JOB","owner":"pc-b/boot-1","generation":1},"result":{}}`},
		{6, "pc-a", `{"token":` + tok + `,"reason":"boom","requeue":true}`},
		{6, "pc-a", `{"token":` + tok + `,"reason":"boom"}`},
		{6, "a$b", `{"token":` + tok + `}`},
		{6, strings.Repeat("a", 65), `{}`},
		{2, "pc-a", `{"token":[]}`},
		{5, "pc-a", `not json`},
		{5, "pc-a", ``},
	}
	for _, s := range seeds {
		f.Add(s.verb, s.agent, []byte(s.body))
	}

	ns := testenv.NATS(f)
	store := openSQLite(f)
	presigner, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: "127.0.0.1:9", Region: "us-east-1", Bucket: "artifacts", AccessKey: "fuzz", SecretKey: "fuzz-secret-key",
	})
	if err != nil {
		f.Fatal(err)
	}
	opts := coordinator.Options{
		ID: "fuzz", LeaseTTL: time.Hour, ReapInterval: time.Hour, ScheduleInterval: time.Hour,
		HeartbeatEvery: time.Hour, Presigner: presigner, Log: zerolog.Nop(),
	}
	startCoordinator(f, ns.ClientURL(), store, opts)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(nc.Close)
	var rnd [8]byte
	_, _ = crand.Read(rnd[:])
	h := &handlerFuzz{nc: nc, store: store, serial: "never-" + hex.EncodeToString(rnd[:])}
	h.next(f)

	f.Fuzz(func(t *testing.T, verbIndex uint8, agent string, body []byte) {
		if !h.current(t) {
			h.next(t)
		}
		verb := protocol.CoordVerbs[int(verbIndex)%len(protocol.CoordVerbs)]
		agent = subjectToken(agent)
		body = []byte(strings.ReplaceAll(string(body), "$JOB", h.cur.JobID))
		before := h.cur

		// What the handler will read as the token, decoded the same way.
		var req struct {
			Token  fencing.Token `json:"token"`
			Name   string        `json:"name"`
			SHA256 string        `json:"sha256"`
		}
		decoded := json.Unmarshal(body, &req) == nil
		// Registering a name again with another sha256 is refused even
		// with the current token.
		nameTaken := false
		if verb == protocol.VerbArtifact && decoded && req.Token == before {
			arts, err := h.store.Artifacts(context.Background(), before.JobID, before.Generation)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range arts {
				nameTaken = nameTaken || a.Name == req.Name && a.SHA256 != req.SHA256
			}
		}
		var acceptedBefore, refusedBefore int
		var forbiddenBefore int64
		if fencedVerbs[verb] && decoded {
			acceptedBefore, _ = h.events(t, verb, req.Token, true)
			refusedBefore, _ = h.events(t, verb, req.Token, false)
			forbiddenBefore = h.refusals(t, agent, verb)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The reply goes to the agent's own inbox, the only one the
		// coordinator answers on.
		sub, err := nc.SubscribeSync(protocol.InboxPrefix(agent) + "." + strings.TrimPrefix(nats.NewInbox(), "_INBOX."))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := nc.PublishRequest(protocol.CoordSubject(agent, verb), sub.Subject, body); err != nil {
			t.Fatal(err)
		}
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("%s on %q: no reply: %v", verb, agent, err)
		}
		code := 200
		if c := msg.Header.Get(micro.ErrorCodeHeader); c != "" {
			code, err = strconv.Atoi(c)
			if err != nil {
				t.Fatalf("error code header %q", c)
			}
			if len(msg.Data) != 0 {
				t.Fatalf("error %d with a body %q", code, msg.Data)
			}
		}
		switch code {
		case 200:
			if !json.Valid(msg.Data) {
				t.Fatalf("%s: reply is not JSON: %q", verb, msg.Data)
			}
		case protocol.CodeBadRequest, protocol.CodeForbidden, protocol.CodeUnknownJob, protocol.CodeStale, protocol.CodeUnavailable:
		default:
			t.Fatalf("%s: unknown error code %d", verb, code)
		}
		if protocol.ValidateAgentID(agent) != nil && code != protocol.CodeBadRequest {
			t.Fatalf("%s on the invalid agent id %q: %d, want 400", verb, agent, code)
		}

		if fencedVerbs[verb] && decoded {
			acceptedAfter, _ := h.events(t, verb, req.Token, true)
			refusedAfter, _ := h.events(t, verb, req.Token, false)
			switch code {
			case 200:
				if replay := h.replayed(t, verb, req.Token, body); replay {
					// The accepted result sent again by its token: answered
					// as the first time, written no more.
					if agent != req.Token.AgentID() || acceptedAfter != acceptedBefore || refusedAfter != refusedBefore+1 {
						t.Fatalf("replayed result %v on %q: accepted %d→%d, refused %d→%d", req.Token, agent, acceptedBefore, acceptedAfter, refusedBefore, refusedAfter)
					}
					break
				}
				if req.Token != before || agent != "pc-a" {
					t.Fatalf("%s with token %v on %q accepted; the current token is %v", verb, req.Token, agent, before)
				}
				if acceptedAfter != acceptedBefore+1 {
					t.Fatalf("%s accepted but recorded %d times", verb, acceptedAfter-acceptedBefore)
				}
			case protocol.CodeForbidden:
				if req.Token.AgentID() == agent {
					t.Fatalf("%s: 403 for the subject's own agent %q", verb, agent)
				}
				if n := h.refusals(t, agent, verb); refusedAfter != refusedBefore || n != forbiddenBefore+1 {
					t.Fatalf("%s: 403 counted %d times, %d write events", verb, n-forbiddenBefore, refusedAfter-refusedBefore)
				}
			case protocol.CodeStale, protocol.CodeUnknownJob:
				if req.Token == before && agent == "pc-a" && !(code == protocol.CodeStale && nameTaken) {
					t.Fatalf("%s with the current token refused %d", verb, code)
				}
				if refusedAfter != refusedBefore+1 {
					t.Fatalf("%s: %d recorded %d times", verb, code, refusedAfter-refusedBefore)
				}
				_, err := h.store.Get(ctx, req.Token.JobID)
				if (code == protocol.CodeUnknownJob) != errors.Is(err, jobstore.ErrNotFound) {
					t.Fatalf("%s: %d for job %q whose lookup says %v", verb, code, req.Token.JobID, err)
				}
			}
		}

		// The job's generation moves only by a grant or by the end of an
		// attempt that is retried: a hello of another boot releasing it, or
		// an accepted fail of the infrastructure (generation + 1 each);
		// nothing else moves it.
		j, err := h.store.Get(ctx, before.JobID)
		if err != nil {
			t.Fatal(err)
		}
		retried := verb == protocol.VerbHello || verb == protocol.VerbFail && code == 200
		switch {
		case j.Generation == before.Generation:
		case j.Generation == before.Generation+1 && retried && j.Status == jobstore.StatusQueued:
		default:
			t.Fatalf("after %s on %q (%d) job is %s at generation %d, was %v", verb, agent, code, j.Status, j.Generation, before)
		}
		if j.Status != jobstore.StatusInProgress && j.Generation == before.Generation && code != 200 {
			t.Fatalf("refused %s (%d) ended the job: %s", verb, code, j.Status)
		}
	})
}

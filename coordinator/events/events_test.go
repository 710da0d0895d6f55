package events_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/outbox"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const wait = 30 * time.Second

var (
	ownerA = fencing.Owner("agent-a", "boot-1")
	ownerB = fencing.Owner("agent-b", "boot-1")
)

func task() protocol.Task {
	return protocol.Task{
		Device: protocol.DeviceSelector{Model: "Pixel 7"},
		Steps:  []protocol.Step{{Op: protocol.OpScreenshot, Name: "screen.png"}},
	}
}

type env struct {
	dsn    string
	store  *pgstore.Store
	broker *events.Broker
	polls  *atomic.Int64 // reads of the broker
}

// countingStore counts the broker's reads.
type countingStore struct {
	*pgstore.Store
	polls *atomic.Int64
}

func (c countingStore) Events(ctx context.Context, q jobstore.EventQuery) ([]jobstore.Event, error) {
	if q.All {
		defer c.polls.Add(1)
	}
	return c.Store.Events(ctx, q)
}

// newEnv opens a PostgreSQL store and runs a broker on it.
func newEnv(t *testing.T, opts events.BrokerOptions) *env {
	t.Helper()
	dsn := testenv.Postgres(t)
	st, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Millisecond
	}
	polls := new(atomic.Int64)
	b := events.NewBroker(countingStore{Store: st, polls: polls}, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{dsn: dsn, store: st, broker: b, polls: polls}
}

func (e *env) submit(t *testing.T, id, project string) {
	t.Helper()
	if _, err := e.store.Submit(t.Context(), jobstore.JobSpec{ID: id, Task: task(), Project: project}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) claim(t *testing.T, id, owner string) jobstore.Lease {
	t.Helper()
	l, err := e.store.Claim(t.Context(), id, owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// handlers returns the routes on an HTTP server; the caller sees projects
// from the X-Projects header (comma-separated), none without it (401).
func (e *env) server(t *testing.T, p coordinator.Presigner) (*httptest.Server, *[]string) {
	t.Helper()
	var forbidden []string
	h := &events.Handlers{
		Broker: e.broker, Store: e.store, Presigner: p, Heartbeat: 20 * time.Millisecond,
		Projects: func(r *http.Request) ([]string, bool) {
			v := r.Header.Get("X-Projects")
			if v == "" {
				return nil, false
			}
			return strings.Split(v, ","), true
		},
		Forbidden: func(r *http.Request, jobID, project string) { forbidden = append(forbidden, jobID+"@"+project) },
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &forbidden
}

type sseEvent struct {
	id    int64
	name  string
	event jobstore.Event
}

// sse reads a stream; events arrive on the channel, closed at its end.
type sse struct {
	resp       *http.Response
	ch         chan sseEvent
	heartbeats chan struct{}
}

func get(t *testing.T, u, projects string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if projects != "" {
		req.Header.Set("X-Projects", projects)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func openSSE(t *testing.T, u, projects string, header map[string]string) *sse {
	t.Helper()
	resp := get(t, u, projects, header)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	s := &sse{resp: resp, ch: make(chan sseEvent, 1000), heartbeats: make(chan struct{}, 1000)}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(s.ch)
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.name != "" {
					s.ch <- cur
				}
				cur = sseEvent{}
			case strings.HasPrefix(line, ": heartbeat"):
				select {
				case s.heartbeats <- struct{}{}:
				default:
				}
			case strings.HasPrefix(line, "id: "):
				cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				cur.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &cur.event); err != nil {
					panic(err)
				}
			}
		}
	}()
	return s
}

// next returns the next event, failing the test after a long wait.
func (s *sse) next(t *testing.T) (sseEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-s.ch:
		return e, ok
	case <-time.After(wait):
		t.Fatal("no event within 30s")
		return sseEvent{}, false
	}
}

func (s *sse) all(t *testing.T) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		e, ok := s.next(t)
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

func names(evs []sseEvent) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// TestJobEventStream: one job's stream over HTTP gives its life in order,
// live, each with the write_events id as SSE id, and ends with the end
// event; reconnecting with Last-Event-ID (or after=) gives exactly the
// rest.
func TestJobEventStream(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	srv, forbidden := e.server(t, nil)
	ctx := t.Context()
	e.submit(t, "j1", "alpha")
	la := e.claim(t, "j1", ownerA)

	s := openSSE(t, srv.URL+"/api/v1/jobs/j1/events", "alpha", nil)
	for _, want := range []string{jobstore.EventQueued, jobstore.EventGranted} {
		if got, _ := s.next(t); got.name != want {
			t.Fatalf("event %q, want %q", got.name, want)
		}
	}
	// Live from here: a renewal is no event, an artifact and a reassign are.
	if _, err := e.store.Renew(ctx, la.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.store.RegisterArtifact(ctx, la.Token, jobstore.ArtifactRecord{
		Name: "screen.png", Key: la.Token.ObjectKey("screen.png"), Size: 42, SHA256: "00", ContentType: "image/png",
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.next(t)
	if got.name != jobstore.EventArtifactRegistered || got.event.Artifact == nil || got.event.Artifact.Name != "screen.png" || got.event.Artifact.Size != 42 {
		t.Fatalf("artifact event %+v", got)
	}
	lb, err := e.store.Reassign(ctx, "j1", ownerB, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RecordEvent(ctx, jobstore.JobEvent{JobID: "j1", Verb: jobstore.VerbStep, Owner: ownerB, Generation: 2, Detail: "1 tap: ok"}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Commit(ctx, lb.Token, json.RawMessage(`{"ok": true}`)); err != nil {
		t.Fatal(err)
	}
	rest := s.all(t) // the stream ends after succeeded
	if got, want := names(rest), []string{jobstore.EventGranted, jobstore.EventStep, jobstore.EventSucceeded}; !reflect.DeepEqual(got, want) {
		t.Fatalf("live events %v, want %v", got, want)
	}
	if g := rest[0].event; g.Generation != 2 || g.Agent != "agent-b" || !strings.Contains(g.Message, "granted g2 to agent agent-b") {
		t.Errorf("grant event %+v", g)
	}

	// The whole stream again, then resumed after each id.
	full := openSSE(t, srv.URL+"/api/v1/jobs/j1/events", "alpha", nil).all(t)
	if len(full) != 6 {
		t.Fatalf("full stream: %v", names(full))
	}
	for i, ev := range full {
		if ev.id != ev.event.ID || ev.name != ev.event.Type {
			t.Errorf("SSE id %d name %s for event %+v", ev.id, ev.name, ev.event)
		}
		if i > 0 && ev.id <= full[i-1].id {
			t.Errorf("ids not increasing: %d after %d", ev.id, full[i-1].id)
		}
	}
	for i := range full[:len(full)-1] {
		resumed := openSSE(t, srv.URL+"/api/v1/jobs/j1/events", "alpha",
			map[string]string{"Last-Event-ID": strconv.FormatInt(full[i].id, 10)}).all(t)
		if got, want := names(resumed), names(full[i+1:]); !reflect.DeepEqual(got, want) {
			t.Errorf("resumed after %d: %v, want %v", full[i].id, got, want)
		}
	}
	viaQuery := openSSE(t, fmt.Sprintf("%s/api/v1/jobs/j1/events?after=%d", srv.URL, full[3].id), "alpha", nil).all(t)
	if got, want := names(viaQuery), names(full[4:]); !reflect.DeepEqual(got, want) {
		t.Errorf("after=: %v, want %v", got, want)
	}

	// Refusals.
	for _, c := range []struct {
		path, projects string
		header         map[string]string
		code           int
	}{
		{"/api/v1/jobs/j1/events", "", nil, http.StatusUnauthorized},
		{"/api/v1/jobs/j1/events", "beta", nil, http.StatusForbidden},
		{"/api/v1/jobs/nope/events", "alpha", nil, http.StatusNotFound},
		{"/api/v1/jobs/j1/events", "alpha", map[string]string{"Last-Event-ID": "x"}, http.StatusBadRequest},
		{"/api/v1/events?project=alpha", "beta", nil, http.StatusForbidden},
		{"/api/v1/events?project=-bad", "beta", nil, http.StatusBadRequest},
		{"/api/v1/jobs/j1/artifacts?generations=some", "alpha", nil, http.StatusBadRequest},
		{"/api/v1/jobs/j1/artifacts", "alpha", nil, http.StatusServiceUnavailable},
	} {
		resp := get(t, srv.URL+c.path, c.projects, c.header)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("GET %s as %q: %s (%s) %s, want %d problem", c.path, c.projects, resp.Status, resp.Header.Get("Content-Type"), body, c.code)
		}
		// The API's problem document, as every route of the API answers.
		var p api.Problem
		path, _, _ := strings.Cut(c.path, "?")
		if err := json.Unmarshal(body, &p); err != nil || p.Status != c.code || !strings.HasPrefix(p.Type, "urn:edgeagent:problem:") || p.Instance != path || p.Detail == "" {
			t.Errorf("GET %s: problem %s, want the API's (type urn:edgeagent:problem:*, instance %s)", c.path, body, path)
		}
		if c.code == http.StatusBadRequest && p.Field == "" {
			t.Errorf("GET %s: a 400 naming no field: %s", c.path, body)
		}
	}
	if want := []string{"j1@alpha", "@alpha"}; !reflect.DeepEqual(*forbidden, want) {
		t.Errorf("forbidden requests told: %v, want %v", *forbidden, want)
	}
}

// TestProjectEventStream: the project stream carries the events of every
// job of the project and none of another, stays open with heartbeats, and
// a token of every project ("*") sees both.
func TestProjectEventStream(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	srv, _ := e.server(t, nil)
	e.submit(t, "a1", "alpha")
	s := openSSE(t, srv.URL+"/api/v1/events?project=alpha", "alpha,beta", nil)
	star := openSSE(t, srv.URL+"/api/v1/events", "*", nil)
	if got, _ := s.next(t); got.event.JobID != "a1" || got.name != jobstore.EventQueued {
		t.Fatalf("first event %+v", got)
	}
	e.submit(t, "b1", "beta")
	e.submit(t, "a2", "alpha")
	if got, _ := s.next(t); got.event.JobID != "a2" {
		t.Fatalf("project alpha got %+v, want a2's queued", got)
	}
	var jobs []string
	for range 3 {
		ev, _ := star.next(t)
		jobs = append(jobs, ev.event.JobID)
	}
	if want := []string{"a1", "b1", "a2"}; !reflect.DeepEqual(jobs, want) {
		t.Errorf("every project: %v, want %v", jobs, want)
	}
	select {
	case <-s.heartbeats:
	case <-time.After(wait):
		t.Fatal("no heartbeat on an idle stream")
	}
	if e.broker.Subscribers() != 2 {
		t.Errorf("%d subscribers, want 2", e.broker.Subscribers())
	}
	s.resp.Body.Close()
	star.resp.Body.Close()
	testenv.Eventually(t, wait, "the broker drops the subscriptions of closed streams", func() bool {
		return e.broker.Subscribers() == 0
	})
}

// TestBrokerHoldsGaps: a write_events id taken by a transaction that has
// not committed holds back the later ids until it commits, so events are
// handed out in id order and a resume point never skips one.
func TestBrokerHoldsGaps(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{GapTimeout: time.Hour})
	ctx := t.Context()
	e.submit(t, "g", "default")
	st := e.broker.Open(events.Filter{JobID: "g"}, 0)
	defer st.Close()
	if ev, _, err := st.Next(ctx, nil); err != nil || ev.Type != jobstore.EventQueued {
		t.Fatalf("first event %+v %v", ev, err)
	}

	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	if err := tx.QueryRow(ctx, `INSERT INTO write_events (job_id, verb, owner, generation, accepted, detail)
		VALUES ('g', 'step', $1, 0, true, '1 tap: ok') RETURNING id`, ownerA).Scan(&held); err != nil {
		t.Fatal(err)
	}
	e.claim(t, "g", ownerA) // commits an id after the held one
	polls := e.polls.Load()
	testenv.Eventually(t, wait, "the broker to poll five times past the committed row", func() bool {
		return e.polls.Load() >= polls+5
	})
	if c := e.broker.Cursor(); c >= held {
		t.Fatalf("cursor %d passed the uncommitted id %d", c, held)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		ev, _, err := st.Next(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Type)
	}
	if want := []string{jobstore.EventStep, jobstore.EventGranted}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the commit: %v, want %v", got, want)
	}
}

// TestStreamCatchesUpAfterLag: a stream whose reader is slower than the
// broker loses its subscription and reads what it missed from the store:
// every event, in order, once.
func TestStreamCatchesUpAfterLag(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{Buffer: 2})
	ctx := t.Context()
	e.submit(t, "first", "p")
	st := e.broker.Open(events.Filter{Projects: []string{"p"}}, 0)
	defer st.Close()
	if _, _, err := st.Next(ctx, nil); err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		e.submit(t, fmt.Sprintf("j%02d", i), "p")
	}
	testenv.Eventually(t, wait, "the broker reads every submit", func() bool {
		last, _ := e.store.LastEventID(ctx)
		return e.broker.Cursor() == last
	})
	for i := range n {
		ev, _, err := st.Next(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("j%02d", i); ev.JobID != want {
			t.Fatalf("event %d is of %s, want %s", i, ev.JobID, want)
		}
	}
}

// TestWaiter: Wait returns when the job ends, and with ErrWaitTimeout when
// the timeout passes first; an unknown job is ErrNotFound.
func TestWaiter(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	ctx := t.Context()
	w := &events.Waiter{Broker: e.broker, Jobs: e.store}
	e.submit(t, "w", "default")
	if err := w.Wait(ctx, "w", 50*time.Millisecond); !errors.Is(err, events.ErrWaitTimeout) {
		t.Fatalf("wait on a queued job: %v, want ErrWaitTimeout", err)
	}
	l := e.claim(t, "w", ownerA)
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctx, "w", time.Hour) }()
	testenv.Eventually(t, wait, "the waiter subscribes", func() bool { return e.broker.Subscribers() == 1 })
	if err := e.store.Commit(ctx, l.Token, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("wait did not return after the commit")
	}
	if err := w.Wait(ctx, "w", 0); err != nil {
		t.Errorf("wait on a finished job: %v", err)
	}
	if err := w.Wait(ctx, "nope", time.Second); !errors.Is(err, jobstore.ErrNotFound) {
		t.Errorf("wait on an unknown job: %v", err)
	}
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(3, 3, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestArtifactsPresigned: the artifact list gives the generation that
// ended the job, with stamps and a presigned URL that downloads the PNG
// whose sha256 is the record's; generations=all adds the older generation,
// marked superseded.
func TestArtifactsPresigned(t *testing.T) {
	mio := testenv.MinIO(t)
	e := newEnv(t, events.BrokerOptions{})
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := e.server(t, p)
	ctx := t.Context()
	mc := mio.Client(t)
	e.submit(t, "art", "alpha")
	upload := func(tok fencing.Token, data []byte) {
		key := tok.ObjectKey("screen.png")
		if _, err := mc.PutObject(ctx, mio.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: "image/png"}); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if err := e.store.RegisterArtifact(ctx, tok, jobstore.ArtifactRecord{
			Name: "screen.png", Key: key, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), ContentType: "image/png",
		}); err != nil {
			t.Fatal(err)
		}
	}
	la := e.claim(t, "art", ownerA)
	upload(la.Token, []byte("old attempt"))
	lb, err := e.store.Reassign(ctx, "art", ownerB, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	img := pngBytes(t)
	upload(lb.Token, img)
	if err := e.store.Commit(ctx, lb.Token, nil); err != nil {
		t.Fatal(err)
	}

	list := func(query string) events.ArtifactList {
		resp := get(t, srv.URL+"/api/v1/jobs/art/artifacts"+query, "alpha", nil)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("artifacts: %s %s", resp.Status, b)
		}
		var l events.ArtifactList
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := list("")
	if l.Status != jobstore.StatusSucceeded || l.Generation != 2 || len(l.Artifacts) != 1 {
		t.Fatalf("artifact list %+v, want the one of g2", l)
	}
	a := l.Artifacts[0]
	if a.Name != "screen.png" || a.Generation != 2 || a.Owner != ownerB || a.Superseded || a.Key != lb.Token.ObjectKey("screen.png") || a.URL == "" {
		t.Errorf("artifact %+v", a)
	}
	if strings.Contains(a.URL, mio.SecretKey) {
		t.Error("the URL holds the secret key")
	}
	resp, err := http.Get(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download: %s", resp.Status)
	}
	if _, err := png.Decode(bytes.NewReader(body)); err != nil {
		t.Errorf("download is no PNG: %v", err)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != a.SHA256 {
		t.Errorf("downloaded sha256 %x, record %s", sum, a.SHA256)
	}

	all := list("?generations=all")
	if len(all.Artifacts) != 2 || !all.Artifacts[0].Superseded || all.Artifacts[0].Generation != 1 || all.Artifacts[1].Superseded {
		t.Errorf("all generations: %+v", all.Artifacts)
	}
}

// TestEndPublisher: a job cancelled (an end no agent reports) gets an
// outbox message with its status and reason, delivered over NATS by the
// dispatcher; a job an agent failed through FailOutbox keeps its one
// message; a succeeded job gets none from the publisher.
func TestEndPublisher(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	ctx := t.Context()
	ns := testenv.NATS(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := make(chan *nats.Msg, 10)
	if _, err := nc.Subscribe("results", func(m *nats.Msg) { got <- m; _ = m.Respond([]byte(`{"ok":true}`)) }); err != nil {
		t.Fatal(err)
	}
	d := outbox.NewDispatcher(e.store, outbox.Options{
		Sender: outbox.NATSSender{Conn: nc, Subject: "results"}, Interval: 20 * time.Millisecond,
	}, zerolog.Nop())
	pub := &events.EndPublisher{Broker: e.broker, Store: e.store, Published: d.Kick}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(pctx) })
	wg.Go(func() { _ = pub.Run(pctx) })
	defer func() { stop(); wg.Wait() }()

	e.submit(t, "ok", "p")
	lo := e.claim(t, "ok", ownerA)
	if err := e.store.Commit(ctx, lo.Token, nil); err != nil {
		t.Fatal(err)
	}
	e.submit(t, "agentfail", "p")
	lf := e.claim(t, "agentfail", ownerA)
	if err := e.store.FailOutbox(ctx, lf.Token, jobstore.Failure{Reason: "screen locked"}, jobstore.OutboxFailureKey("agentfail", 1)); err != nil {
		t.Fatal(err)
	}
	e.submit(t, "cx", "p")
	e.claim(t, "cx", ownerB)
	if _, err := e.store.Cancel(ctx, "cx", "not needed"); err != nil {
		t.Fatal(err)
	}
	j, err := e.store.Get(ctx, "cx")
	if err != nil {
		t.Fatal(err)
	}

	msgs := map[string]map[string]any{}
	for len(msgs) < 2 {
		select {
		case m := <-got:
			var p map[string]any
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Fatal(err)
			}
			msgs[p["job_id"].(string)] = p
		case <-time.After(wait):
			t.Fatalf("outbox messages received: %v", msgs)
		}
	}
	cx := msgs["cx"]
	if cx == nil || cx["status"] != j.Status || cx["reason"] != "not needed" || cx["event"] != jobstore.OutboxEndEvent(j.Status) ||
		cx["key"] != jobstore.OutboxFailureKey("cx", 1) || cx["owner"] != ownerB {
		t.Errorf("message of the cancelled job: %v", cx)
	}
	if af := msgs["agentfail"]; af == nil || af["reason"] != "screen locked" {
		t.Errorf("message of the failed job: %v", af)
	}
	testenv.Eventually(t, wait, "both messages delivered", func() bool {
		rs, err := e.store.ListEffects(ctx, jobstore.EffectFilter{Kind: jobstore.EffectKindOutbox})
		if err != nil || len(rs) != 2 {
			return false
		}
		for _, r := range rs {
			if r.State != protocol.EffectDone {
				return false
			}
		}
		return true
	})
	// The publisher read every event; nothing more is written.
	testenv.Eventually(t, wait, "the broker to read every row", func() bool {
		last, _ := e.store.LastEventID(ctx)
		return e.broker.Cursor() == last
	})
	if rs, _ := e.store.ListEffects(ctx, jobstore.EffectFilter{Kind: jobstore.EffectKindOutbox}); len(rs) != 2 {
		t.Errorf("%d outbox messages, want 2 (no message for the succeeded job, one for the failed one)", len(rs))
	}
}

// TestIdleSubscribersHoldNoBuffer: a subscription's queue grows on demand,
// so a thousand idle subscribers cost the heap little, and each still gets
// the events that come.
func TestIdleSubscribersHoldNoBuffer(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	ctx := t.Context()
	const n = 1000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	subs := make([]*events.Subscription, n)
	for i := range subs {
		s, err := e.broker.Subscribe(ctx, events.Filter{Projects: []string{"p"}})
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grew > 8<<20 {
		t.Errorf("%d idle subscribers took %d bytes of heap, more than 8 MiB", n, grew)
	}
	e.submit(t, "one", "p")
	for i, s := range subs {
		var got []events.Message
		for len(got) == 0 {
			select {
			case <-s.Ready():
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			msgs, open := s.Take()
			if !open {
				t.Fatalf("subscriber %d ended (lagged %v)", i, s.Lagged())
			}
			got = msgs
		}
		if got[0].Event.JobID != "one" {
			t.Fatalf("subscriber %d got %+v first", i, got[0].Event)
		}
		s.Close()
	}
}

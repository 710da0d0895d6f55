package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/events"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/pgstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/e2e"
)

// startEventsBinary is edgecoord serve from the real binary with the HTTP
// API and artifact storage in the Env's MinIO bucket.
func startEventsBinary(t *testing.T, env *e2e.Env) *apiBinary {
	t.Helper()
	c := env.StartCoordinator(e2e.CoordinatorOptions{ID: "events-test", LeaseTTL: 5 * time.Second, API: true, Storage: true, LogLevel: "debug", Extra: `
storage:
  presign_expiry: 2m
lease:
  reap_interval: 200ms
`})
	return &apiBinary{Coordinator: c, client: apitest.Client(t)}
}

// sseFrame is one event of a stream as a client reads it.
type sseFrame struct {
	id    int64
	event string
	data  jobstore.Event
}

// sseStream is an open event stream.
type sseStream struct {
	resp   *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
}

// openStream GETs an event stream through the checking client; it fails
// the test unless the answer is 200 text/event-stream.
func (b *apiBinary) openStream(t *testing.T, path, token string, hdr ...string) *sseStream {
	t.Helper()
	// A guard against a hang, so that the test ends with the logs.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", b.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	s := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() { s.cancel(); s.resp.Body.Close() }

// next reads the next event frame (comments and retry lines skipped); ok
// false when the stream ended.
func (s *sseStream) next(t *testing.T) (f sseFrame, ok bool) {
	t.Helper()
	var data string
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return f, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if data == "" {
				continue
			}
			if err := json.Unmarshal([]byte(data), &f.data); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			return f, true
		case strings.HasPrefix(line, "id: "):
			f.id, err = strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				t.Fatalf("event id %q: %v", line, err)
			}
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data += line[6:]
		}
	}
}

// rest reads the stream to its end.
func (s *sseStream) rest(t *testing.T) []sseFrame {
	t.Helper()
	var out []sseFrame
	for {
		f, ok := s.next(t)
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

func frameIDs(fs []sseFrame) []int64 {
	ids := make([]int64, len(fs))
	for i, f := range fs {
		ids[i] = f.id
	}
	return ids
}

func frameTypes(fs []sseFrame) []string {
	ts := make([]string, len(fs))
	for i, f := range fs {
		ts[i] = f.event
	}
	return ts
}

// TestAPIEventsBinary drives the real edgecoord binary (PostgreSQL, NATS,
// MinIO) and the agent package, in the test process, with a simulated
// phone, purely over HTTP through the client that checks every exchange
// against docs/openapi.yaml: a token made with the CLI, a job with a
// screenshot submitted, its event stream followed to SUCCEEDED (cut once
// and resumed with Last-Event-ID: no event lost or repeated), a long poll
// ?wait=30s answered with the finished job, the artifact listed and its
// screenshot downloaded through the presigned URL: a PNG whose object in
// MinIO carries the job's stamps (job id, owner, generation). Then the
// project stream, a refusal recorded, and a shutdown with a stream open.
func TestAPIEventsBinary(t *testing.T) {
	t.Parallel() // waits on slots and timeouts most of its time; its servers are its own
	env := e2e.NewEnv(t)
	mio := env.MinIO()
	b := startEventsBinary(t, env)

	out, errOut, code := b.CLI(t, "token", "create", "--project", "lab", "--scopes", "read,submit,operate")
	tok := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(tok, api.TokenPrefix) {
		t.Fatalf("token create: exit %d, %q %q", code, out, errOut)
	}

	// Submitted before any agent runs, so the job waits queued while the
	// stream and the long poll start.
	r := b.call(t, "POST", "/api/v1/jobs", tok, `{"project": "lab", "device": {"serial": "sim-pc-1"}, "steps": [{"op": "screenshot", "name": "screen.png"}]}`)
	var job api.JobView
	r.into(t, &job)
	if r.status != 201 || job.ID == "" || job.Status != jobstore.StatusQueued {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}

	type polled struct {
		r   httpReply
		err error
	}
	waited := make(chan polled, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), "GET", b.Base+"/api/v1/jobs/"+job.ID+"?wait=30s", nil)
		if err != nil {
			waited <- polled{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := b.client.Do(req)
		if err != nil {
			waited <- polled{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		waited <- polled{httpReply{resp.StatusCode, resp.Header, body}, err}
	}()

	// The stream from the start: the queued event, then the stream is cut.
	s := b.openStream(t, "/api/v1/jobs/"+job.ID+"/events", tok)
	first, ok := s.next(t)
	if !ok || first.event != jobstore.EventQueued || first.data.JobID != job.ID || first.data.Project != "lab" {
		t.Fatalf("first event %+v (stream open %v)", first, ok)
	}
	s.close()
	select {
	case p := <-waited:
		t.Fatalf("?wait=30s answered while the job was queued: %d %s", p.r.status, p.r.body)
	default:
	}

	// The agent runs the job while no stream is open; the stream resumed
	// after the last event received gives everything after it, to the end.
	env.StartSimAgent(e2e.SimAgentOptions{ID: "pc-1", Phone: capture.SimOptions{Model: "Pixel 7"}, RequestTimeout: 2 * time.Second})
	resumed := b.openStream(t, "/api/v1/jobs/"+job.ID+"/events", tok, "Last-Event-ID", strconv.FormatInt(first.id, 10)).rest(t)
	if len(resumed) == 0 || resumed[len(resumed)-1].event != jobstore.EventSucceeded || resumed[len(resumed)-1].data.Status != jobstore.StatusSucceeded {
		t.Fatalf("resumed stream %v does not end with succeeded", frameTypes(resumed))
	}
	got := append([]sseFrame{first}, resumed...)
	full := b.openStream(t, "/api/v1/jobs/"+job.ID+"/events", tok).rest(t)
	if !slices.Equal(frameIDs(got), frameIDs(full)) {
		t.Fatalf("cut and resumed: ids %v, the whole stream %v: an event lost or repeated", frameIDs(got), frameIDs(full))
	}
	for i := 1; i < len(full); i++ {
		if full[i].id <= full[i-1].id {
			t.Errorf("ids not increasing: %v", frameIDs(full))
		}
	}
	types := frameTypes(full)
	for _, want := range []string{jobstore.EventQueued, jobstore.EventGranted, jobstore.EventArtifactRegistered, jobstore.EventSucceeded} {
		if !slices.Contains(types, want) {
			t.Errorf("stream %v has no %s event", types, want)
		}
	}

	// The long poll answered with the finished job.
	select {
	case p := <-waited:
		if p.err != nil {
			t.Fatalf("?wait=30s: %v", p.err)
		}
		var d api.JobDetail
		p.r.into(t, &d)
		if p.r.status != 200 || d.Status != jobstore.StatusSucceeded {
			t.Fatalf("?wait=30s: %d %s", p.r.status, p.r.body)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("?wait=30s did not answer")
	}
	if r := b.call(t, "GET", "/api/v1/jobs/"+job.ID+"?wait=30s", tok, ""); r.status != 200 {
		t.Errorf("?wait=30s on a finished job: %d %s", r.status, r.body)
	}
	var detail api.JobDetail
	b.call(t, "GET", "/api/v1/jobs/"+job.ID, tok, "").into(t, &detail)
	// A wait that passes answers the job as it is, not an error.
	r = b.call(t, "POST", "/api/v1/jobs", tok, `{"project": "lab", "device": {"serial": "no-such-phone"}, "steps": [{"op": "wait"}]}`)
	var idle api.JobView
	r.into(t, &idle)
	var still api.JobDetail
	r = b.call(t, "GET", "/api/v1/jobs/"+idle.ID+"?wait=1s", tok, "")
	r.into(t, &still)
	if r.status != 200 || still.Status != jobstore.StatusQueued {
		t.Errorf("?wait=1s on a job no phone can run: %d %s", r.status, r.body)
	}

	// The artifact, downloaded through its presigned URL.
	r = b.call(t, "GET", "/api/v1/jobs/"+job.ID+"/artifacts", tok, "")
	var list events.ArtifactList
	r.into(t, &list)
	shot := slices.IndexFunc(list.Artifacts, func(a events.Artifact) bool { return a.Name == "screen.png" })
	if r.status != 200 || list.Status != jobstore.StatusSucceeded || list.Generation != 1 || shot < 0 {
		t.Fatalf("artifacts: %d %s", r.status, r.body)
	}
	a := list.Artifacts[shot]
	if a.Generation != 1 || a.Superseded || len(detail.Generations) != 1 || a.Owner != detail.Generations[0].Owner || !strings.HasPrefix(a.Owner, "pc-1/") {
		t.Errorf("artifact %+v of a job whose generations are %+v", a, detail.Generations)
	}
	if strings.Contains(a.URL, mio.SecretKey) {
		t.Error("the presigned URL holds the storage secret")
	}
	resp, err := http.Get(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	img, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("download: %d %v", resp.StatusCode, err)
	}
	sum := sha256.Sum256(img)
	if hex.EncodeToString(sum[:]) != a.SHA256 || int64(len(img)) != a.Size {
		t.Errorf("downloaded %d bytes with sha256 %x; the list says %d, %s", len(img), sum, a.Size, a.SHA256)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width != 180 || cfg.Height != 320 {
		t.Errorf("the screenshot is not the phone's 180x320 PNG: %+v %v", cfg, err)
	}
	info, err := mio.Client(t).StatObject(t.Context(), mio.Bucket, a.Key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stamp, err := fencing.FromMetadata(info.UserMetadata)
	if err != nil {
		t.Fatalf("object metadata %v: %v", info.UserMetadata, err)
	}
	if stamp.JobID != job.ID || stamp.Owner != a.Owner || stamp.Generation != a.Generation {
		t.Errorf("object stamped %+v, want job %s, owner %s, generation %d", stamp, job.ID, a.Owner, a.Generation)
	}
	if r := b.call(t, "GET", "/api/v1/jobs/"+job.ID+"/artifacts?generations=some", tok, ""); r.status != 400 {
		t.Errorf("generations=some: %d %s", r.status, r.body)
	}

	// The project's stream has the job's events; another project's is a
	// recorded 403, also when named after one of the token's.
	ps := b.openStream(t, "/api/v1/events?project=lab", tok, "Last-Event-ID", "0")
	var projectTypes []string
	for {
		f, ok := ps.next(t)
		if !ok {
			t.Fatalf("project stream ended after %v", projectTypes)
		}
		if f.data.JobID == job.ID {
			projectTypes = append(projectTypes, f.event)
		}
		if f.event == jobstore.EventSucceeded {
			break
		}
	}
	if !slices.Equal(projectTypes, types) {
		t.Errorf("project stream gave the job %v, its own stream %v", projectTypes, types)
	}
	for _, path := range []string{"/api/v1/events?project=other", "/api/v1/events?project=lab&project=other"} {
		if r := b.call(t, "GET", path, tok, ""); r.status != http.StatusForbidden {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	if r := b.call(t, "GET", "/api/v1/jobs/"+job.ID+"/events", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("stream without a token: %d %s", r.status, r.body)
	}
	store, err := pgstore.OpenExisting(t.Context(), b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := store.APIDenials(t.Context())
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range ds {
		if d.Project != "other" || d.Kind != jobstore.DenialProject || d.Route != "/api/v1/events" {
			t.Errorf("recorded denial %+v, want requests for project other", d)
		}
		n += d.Count
	}
	if n != 2 {
		t.Errorf("recorded denials %+v, want both requests for project other counted", ds)
	}

	// SIGTERM with a stream open: the stream ends and the process exits 0.
	open := b.openStream(t, "/api/v1/events", tok, "Last-Event-ID", strconv.FormatInt(full[len(full)-1].id, 10))
	b.Signal(t, syscall.SIGTERM)
	for _, f := range open.rest(t) {
		if f.data.JobID == job.ID {
			t.Errorf("a stream after the job's last event gave its %s event again", f.event)
		}
	}
	if code := b.Wait(t); code != 0 {
		t.Errorf("edgecoord serve exited %d", code)
	}
	if logs := b.Log(); strings.Contains(logs, tok[len(api.TokenPrefix):len(api.TokenPrefix)+16]) {
		t.Error("the coordinator logged the token")
	}
}

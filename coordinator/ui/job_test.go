package ui_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// withStorage gives the dashboard a presigner on a MinIO bucket.
func withStorage(t *testing.T) (func(*ui.Options), testenv.MinIOServer) {
	mio := testenv.MinIO(t)
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *ui.Options) {
		o.Presigner = p
		o.StorageOrigin = "http://" + mio.Endpoint
	}, mio
}

// upload puts data in the bucket under tok and registers it.
func (e *env) upload(mio testenv.MinIOServer, tok fencing.Token, name, contentType string, data []byte) {
	e.t.Helper()
	key := tok.ObjectKey(name)
	if _, err := mio.Client(e.t).PutObject(e.t.Context(), mio.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: contentType}); err != nil {
		e.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if err := e.store.RegisterArtifact(e.t.Context(), tok, jobstore.ArtifactRecord{
		Name: name, Key: key, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), ContentType: contentType,
	}); err != nil {
		e.t.Fatal(err)
	}
}

// oplog is an operation log with a screenshot step, a typed text step and
// (with video) a recording.
func oplog(serial, shot string, video bool) []byte {
	lines := []string{
		fmt.Sprintf(`{"time":"2026-11-30T06:24:25.741Z","seq":1,"serial":%q,"op":"tap","params":{"x":360,"y":640},"duration_ms":0.01,"outcome":"ok"}`, serial),
		fmt.Sprintf(`{"time":"2026-11-30T06:24:25.742Z","seq":2,"serial":%q,"op":"screenshot","params":{"name":%q},"duration_ms":13,"outcome":"ok","artifacts":[{"name":%q,"content_type":"image/png","size":8,"sha256":"x"}]}`, serial, shot, shot),
		fmt.Sprintf(`{"time":"2026-11-30T06:24:25.743Z","seq":3,"serial":%q,"op":"launch","params":{"package":"<script>alert(1)</script>"},"duration_ms":1,"outcome":"error","error":"<b>not installed</b>"}`, serial),
	}
	if video {
		lines = append(lines, fmt.Sprintf(`{"time":"2026-11-30T06:24:26Z","seq":4,"serial":%q,"op":"record_stop","duration_ms":1,"outcome":"ok","artifacts":[{"name":"rec.mp4","content_type":"video/mp4","size":4,"sha256":"y"}]}`, serial))
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

var png = []byte("\x89PNG\r\n\x1a\nfake")

// TestJobPage: the job page shows each generation (who held it, how
// granted, how it ended), every write attempt with the refused stale one
// marked, the operation log of each generation with its screenshots inline
// (loading through a presigned URL) and its recording playable, and the
// artifacts as presigned downloads; the fleet shows the phone's last
// screenshot.
func TestJobPage(t *testing.T) {
	storage, mio := withStorage(t)
	forKinds(t, func(t *testing.T, kind string) {
		e := newEnv(t, kind, storage)
		ctx := t.Context()
		devA, devB := ready("A1", "Pixel 7"), ready("B1", "Pixel 7")
		e.hello("agent-a", devA)
		e.hello("agent-b", devB)
		e.submit("j1", "p1", protocol.DeviceSelector{Serial: "A1"})
		l1 := e.claim("agent-a", devA)
		e.upload(mio, l1.Token, "a.png", "image/png", png)
		e.upload(mio, l1.Token, ui.OpLogName, "application/x-ndjson", oplog("A1", "a.png", false))
		l2, err := e.store.Reassign(ctx, "j1", fencing.Owner("agent-b", "boot-1"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Commit(ctx, l1.Token, []byte(`{}`)); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("stale commit: %v", err)
		}
		e.upload(mio, l2.Token, "b.png", "image/png", png)
		e.upload(mio, l2.Token, "rec.mp4", "video/mp4", []byte("mp4!"))
		e.upload(mio, l2.Token, ui.OpLogName, "application/x-ndjson", oplog("B1", "b.png", true))
		if err := e.store.Commit(ctx, l2.Token, []byte(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}

		c := e.login(e.token("ops", []string{"p1"}, "read"))
		r := e.get(c, "/ui/jobs/j1")
		if r.status != http.StatusOK {
			t.Fatalf("job page: %s", r)
		}
		if st := text(r.one(t, `td#job-status`)); st != "SUCCEEDED" {
			t.Errorf("status %q", st)
		}
		g1, g2 := text(r.one(t, `ol#generations li[data-generation=1]`)), text(r.one(t, `ol#generations li[data-generation=2]`))
		if !strings.Contains(g1, "agent-a/boot-1") || !strings.Contains(g1, "claim") || !strings.Contains(g1, "reassigned") {
			t.Errorf("generation 1: %q", g1)
		}
		if !strings.Contains(g2, "agent-b/boot-1") || !strings.Contains(g2, "reassign") || !strings.Contains(g2, "succeeded") {
			t.Errorf("generation 2: %q", g2)
		}
		refused := r.all(`table#writes tr.refused[data-accepted=false]`)
		if len(refused) != 1 || !strings.Contains(text(refused[0]), "result") || !strings.Contains(text(refused[0]), "agent-a/boot-1") {
			t.Fatalf("refused writes: %d\n%s", len(refused), r.body)
		}
		if n := len(r.all(`table#writes tr[data-accepted=true]`)); n < 5 {
			t.Errorf("%d accepted writes", n)
		}
		shots := r.all(`section#oplog img.screenshot`)
		if len(shots) != 2 || len(r.all(`section#oplog video`)) != 1 {
			t.Fatalf("%d screenshots, %d videos in the op log\n%s", len(shots), len(r.all(`section#oplog video`)), r.body)
		}
		if strings.Contains(r.body, "<script>alert") || strings.Contains(r.body, "<b>not installed") {
			t.Errorf("op log text not escaped")
		}
		// The screenshot loads: the dashboard's URL redirects to a presigned
		// one on the storage server.
		src := attr(shots[1], "src")
		rr := e.get(c, src)
		if rr.status != http.StatusFound || !strings.HasPrefix(rr.header.Get("Location"), "http://"+mio.Endpoint+"/") {
			t.Fatalf("screenshot %s: %d %s", src, rr.status, rr.header.Get("Location"))
		}
		resp, err := http.Get(rr.header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, png) {
			t.Errorf("presigned screenshot: %d %q", resp.StatusCode, body)
		}
		links := r.all(`a.artifact`)
		if len(links) != 5 {
			t.Errorf("%d artifact links, want 5", len(links))
		}
		for _, a := range links {
			if !strings.HasPrefix(attr(a, "href"), "http://"+mio.Endpoint+"/") || !strings.Contains(attr(a, "href"), "X-Amz-Signature") {
				t.Errorf("artifact link %s is not presigned", attr(a, "href"))
			}
		}
		if rr := e.get(c, "/ui/jobs/j1/artifacts/2/nope.png"); rr.status != http.StatusNotFound {
			t.Errorf("unknown artifact: %d", rr.status)
		}

		// A job granted on phone B1 by the scheduler leaves the phone's
		// thumbnail (a management reassignment names no phone).
		e.submit("j2", "p1", protocol.DeviceSelector{Serial: "B1"})
		l3 := e.claim("agent-b", devB)
		e.upload(mio, l3.Token, "c.png", "image/png", png)
		if err := e.store.Commit(ctx, l3.Token, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		fleet := e.get(c, "/ui/fleet")
		thumb := fleet.one(t, `tr[data-phone=agent-b/B1] img.thumb`)
		if attr(thumb, "src") != "/ui/jobs/j2/artifacts/1/c.png" {
			t.Errorf("thumbnail %s", attr(thumb, "src"))
		}
		if len(fleet.all(`tr[data-phone=agent-a/A1] img.thumb`)) != 0 {
			t.Errorf("agent-a's phone shows a screenshot of a generation that did not end the job")
		}
		// Another project's token sees neither the job nor the thumbnail.
		other := e.login(e.token("other", []string{"p2"}, "read"))
		if len(e.get(other, "/ui/fleet").all(`img.thumb`)) != 0 {
			t.Errorf("another project's token sees the thumbnail")
		}
	})
}

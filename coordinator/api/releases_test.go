package api_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// releaseEnv is an API whose releases go to a real MinIO bucket, with a
// release body limit of limit bytes.
func releaseEnv(t *testing.T, limit int64) (*env, testenv.MinIOServer) {
	return bucketEnv(t, func(o *api.Options, p *coordinator.S3Presigner) { o.Releases, o.MaxReleaseBytes = p, limit })
}

// postRelease posts body as a release binary with the query q.
func (e *env) postRelease(token string, q url.Values, body []byte, chunked bool) reply {
	e.t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, e.srv.URL+"/api/v1/releases?"+q.Encode(), rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// signedRelease is the query of a release of body for linux/amd64, signed.
func signedRelease(t *testing.T, key ed25519.PrivateKey, version string, body []byte) url.Values {
	t.Helper()
	sum := sha256.Sum256(body)
	r := protocol.Release{Version: version, OS: "linux", Arch: "amd64", Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}
	r.Sign(key)
	return url.Values{"version": {r.Version}, "os": {r.OS}, "arch": {r.Arch}, "sha256": {r.SHA256}, "signature": {r.Signature}}
}

func with(q url.Values, k, v string) url.Values {
	c := url.Values{}
	for kk, vv := range q {
		c[kk] = vv
	}
	c.Set(k, v)
	return c
}

// TestReleaseAddRefusals: a release binary is refused, storing nothing,
// when it is over the limit or has no length, when its version, OS,
// digest or signature is malformed, when its format is not its OS's, when
// its bytes are not those of the declared digest, and without scope
// admin; a good one is stored (201) once, 200 again, and another binary
// for the same version and platform is 409. A rollout is refused for a
// version no release is stored of, a bad selector, steps or timeout; one
// is started (201), a second while it is active is 409, and pause,
// resume and abort move it only from the states they apply to.
func TestReleaseAddRefusals(t *testing.T) {
	e, mio := releaseEnv(t, 4096)
	admin := e.token("ops", []string{"lab"}, "read", "admin")
	reader := e.token("rita", []string{"lab"}, "read")
	_, key, _ := ed25519.GenerateKey(nil)
	elfBin := append([]byte("\x7fELF\x02\x01\x01"), bytes.Repeat([]byte("x"), 100)...)
	good := signedRelease(t, key, "v1.4.0", elfBin)
	big := append(bytes.Clone(elfBin), make([]byte, 4096)...)
	exe := append([]byte("MZ\x90\x00"), bytes.Repeat([]byte("y"), 100)...)
	for _, c := range []struct {
		name    string
		token   string
		q       url.Values
		body    []byte
		chunked bool
		status  int
		field   string
		detail  string
	}{
		{"over the limit", admin, signedRelease(t, key, "v1.4.0", big), big, false, 413, "", "larger than the limit of 4096 bytes"},
		{"no length", admin, good, elfBin, true, 411, "", "Content-Length required"},
		{"no version", admin, with(good, "version", "1.4"), elfBin, false, 422, "version", "not a release version"},
		{"version without v", admin, with(good, "version", "1.4.0"), elfBin, false, 422, "version", "write it as v1.4.0"},
		{"bad os", admin, with(good, "os", "Linux"), elfBin, false, 422, "os", "not a GOOS name"},
		{"bad digest", admin, with(good, "sha256", "abc"), elfBin, false, 422, "sha256", "64 lower-case hex"},
		{"bad signature", admin, with(good, "signature", "c2ln"), elfBin, false, 422, "signature", "ed25519 signature"},
		{"a PE for linux", admin, signedRelease(t, key, "v1.4.0", exe), exe, false, 422, "body", "not a elf executable"},
		{"other bytes", admin, good, append(bytes.Clone(elfBin[:len(elfBin)-1]), 'z'), false, 422, "sha256", "not the one declared"},
		{"read scope", reader, good, elfBin, false, 403, "", "lacks scope admin"},
	} {
		r := e.postRelease(c.token, c.q, c.body, c.chunked)
		p := r.problem(t)
		if r.status != c.status || p.Field != c.field || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%s: %d field %q %q; want %d field %q with %q", c.name, r.status, p.Field, p.Detail, c.status, c.field, c.detail)
		}
	}
	for o := range mio.Client(t).ListObjects(t.Context(), mio.Bucket, minio.ListObjectsOptions{Prefix: "releases/", Recursive: true}) {
		t.Errorf("a refused release left %s %v", o.Key, o.Err)
	}
	if list, _ := e.store.ListReleases(t.Context()); len(list) != 0 {
		t.Fatalf("a refused release was recorded: %+v", list)
	}

	var rec jobstore.ReleaseRecord
	if r := e.postRelease(admin, good, elfBin, false); r.status != http.StatusCreated {
		t.Fatalf("add: %d %s", r.status, r.body)
	} else {
		r.decode(t, &rec)
	}
	if rec.AddedBy != "ops" || rec.Size != int64(len(elfBin)) || rec.Verify(key.Public().(ed25519.PublicKey)) != nil {
		t.Fatalf("added %+v", rec)
	}
	if r := e.postRelease(admin, good, elfBin, false); r.status != http.StatusOK {
		t.Fatalf("the same binary again: %d %s", r.status, r.body)
	}
	other := append(bytes.Clone(elfBin), 'w')
	if r := e.postRelease(admin, signedRelease(t, key, "v1.4.0", other), other, false); r.status != http.StatusConflict || r.problem(t).Field != "sha256" {
		t.Fatalf("another binary for v1.4.0 linux/amd64: %d %s", r.status, r.body)
	}
	var list api.ReleaseList
	if r := e.do("GET", "/api/v1/releases", reader, ""); r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	} else if r.decode(t, &list); len(list.Releases) != 1 || list.Releases[0] != rec {
		t.Fatalf("list: %+v", list)
	}

	for _, c := range []struct{ name, body, field, detail string }{
		{"unknown version", `{"version": "v9.9.9"}`, "version", "no release v9.9.9 is stored"},
		{"no version", `{"version": "latest"}`, "version", "not a release version"},
		{"bad selector", `{"version": "v1.4.0", "agents": "pc-[1"}`, "agents", "not an agent id or pattern"},
		{"too many patterns", `{"version": "v1.4.0", "agents": "` + strings.Repeat("a,", 64) + `a"}`, "agents", "65 patterns"},
		{"steps down", `{"version": "v1.4.0", "steps": [50, 25]}`, "steps[1]", "ascending"},
		{"steps short of 100", `{"version": "v1.4.0", "steps": [5, 50]}`, "steps", "want 100%"},
		{"bad timeout", `{"version": "v1.4.0", "timeout": "soon"}`, "timeout", "not a duration"},
		{"negative max failures", `{"version": "v1.4.0", "max_failures": -1}`, "max_failures", "want 0"},
	} {
		r := e.do("POST", "/api/v1/rollouts", admin, c.body)
		if p := r.problem(t); r.status != http.StatusUnprocessableEntity || p.Field != c.field || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%s: %d field %q %q; want 422 field %q with %q", c.name, r.status, p.Field, p.Detail, c.field, c.detail)
		}
	}
	if r := e.do("POST", "/api/v1/rollouts", reader, `{"version": "v1.4.0"}`); r.status != http.StatusForbidden {
		t.Errorf("a rollout started with scope read: %d", r.status)
	}
	r := e.do("POST", "/api/v1/rollouts", admin, `{"version": "1.4.0", "agents": "pc-*", "max_failures": 2}`)
	var ro jobstore.Rollout
	if r.status != http.StatusCreated {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	r.decode(t, &ro)
	if ro.Version != "v1.4.0" || ro.State != jobstore.RolloutRunning || len(ro.Steps) != 3 || ro.TimeoutMS != api.DefaultRolloutTimeout.Milliseconds() ||
		r.header.Get("Location") != "/api/v1/rollouts/"+ro.ID {
		t.Fatalf("started %+v (Location %q)", ro, r.header.Get("Location"))
	}
	if r := e.do("POST", "/api/v1/rollouts", admin, `{"version": "v1.4.0"}`); r.status != http.StatusConflict {
		t.Fatalf("a second active rollout: %d %s", r.status, r.body)
	}
	var v api.RolloutView
	if r := e.do("GET", "/api/v1/rollouts/"+ro.ID, reader, ""); r.status != http.StatusOK {
		t.Fatalf("show: %d %s", r.status, r.body)
	} else if r.decode(t, &v); v.ID != ro.ID || v.Agents != "pc-*" || v.AgentStates == nil {
		t.Fatalf("show: %+v", v)
	}
	if r := e.do("GET", "/api/v1/rollouts/ro..%2F", reader, ""); r.status != http.StatusBadRequest && r.status != http.StatusNotFound {
		t.Errorf("a malformed id: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/rollouts/ro-none", reader, ""); r.status != http.StatusNotFound {
		t.Errorf("an unknown rollout: %d", r.status)
	}
	for _, step := range []struct {
		verb   string
		status int
		state  string
	}{
		{"resume", 409, ""}, {"pause", 200, "paused"}, {"pause", 409, ""}, {"resume", 200, "running"}, {"abort", 200, "aborted"}, {"abort", 409, ""},
	} {
		r := e.do("POST", "/api/v1/rollouts/"+ro.ID+"/"+step.verb, admin, "")
		var got jobstore.Rollout
		if r.status == http.StatusOK {
			r.decode(t, &got)
		}
		if r.status != step.status || got.State != step.state {
			t.Fatalf("%s: %d %s; want %d %s", step.verb, r.status, r.body, step.status, step.state)
		}
	}
	var rl api.RolloutList
	if r := e.do("GET", "/api/v1/rollouts", reader, ""); r.status != http.StatusOK {
		t.Fatalf("list rollouts: %d", r.status)
	} else if r.decode(t, &rl); len(rl.Rollouts) != 1 || rl.Rollouts[0].State != jobstore.RolloutAborted || !strings.Contains(rl.Rollouts[0].Reason, "ops") {
		t.Fatalf("rollouts: %+v", rl)
	}
}

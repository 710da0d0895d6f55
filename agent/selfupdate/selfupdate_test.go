package selfupdate

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/protocol"
)

// release describes body as a release (unsigned: the signature is the
// agent's check, before any download).
func release(body []byte) protocol.Release {
	return protocol.Release{Version: "v2.0.0", OS: runtime.GOOS, Arch: runtime.GOARCH, Size: int64(len(body)), SHA256: protocol.HexSHA256(sha256.Sum256(body))}
}

// server serves body at /bin with Range support and records the Range
// header of every request.
func server(t *testing.T, body []byte) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		http.ServeContent(w, r, "bin", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ranges...)
	}
}

// TestDownloadResumes: a part file holding a prefix of the binary is
// completed with a Range request for the rest; a whole part needs no
// request; a part longer than the release starts over.
func TestDownloadResumes(t *testing.T) {
	body := bytes.Repeat([]byte("edgeagent binary "), 1000)
	srv, ranges := server(t, body)
	part := filepath.Join(t.TempDir(), "bin.part")
	if err := os.WriteFile(part, body[:5000], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Download(t.Context(), srv.Client(), srv.URL+"/bin?X-Amz-Signature=secret", part, int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(part); !bytes.Equal(got, body) {
		t.Fatalf("resumed download: %d bytes, not the binary", len(got))
	}
	if r := ranges(); len(r) != 1 || r[0] != "bytes=5000-" {
		t.Fatalf("requests with ranges %q, want one for bytes=5000-", r)
	}
	if err := Download(t.Context(), srv.Client(), srv.URL+"/bin", part, int64(len(body))); err != nil || len(ranges()) != 1 {
		t.Fatalf("whole part: %v, %d requests", err, len(ranges()))
	}
	if err := os.WriteFile(part, append(bytes.Clone(body), "junk"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Download(t.Context(), srv.Client(), srv.URL+"/bin", part, int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(part); !bytes.Equal(got, body) || ranges()[1] != "" {
		t.Fatalf("overlong part: %d bytes, range %q", len(got), ranges()[1])
	}
	if fi, _ := os.Stat(part); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("part mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestDownloadBounded: a server that sends more than the release's size
// is cut off (ErrMismatch) and its bytes dropped; an error names the host
// but never the URL's query, which is a credential.
func TestDownloadBounded(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 4096)
	srv, _ := server(t, body)
	part := filepath.Join(t.TempDir(), "bin.part")
	err := Download(t.Context(), srv.Client(), srv.URL+"/bin?X-Amz-Signature=secret", part, 1000)
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("oversized body: %v, want ErrMismatch", err)
	}
	if fi, _ := os.Stat(part); fi.Size() != 0 {
		t.Fatalf("oversized body left %d bytes", fi.Size())
	}
	down := httptest.NewServer(http.NotFoundHandler())
	defer down.Close()
	err = Download(t.Context(), down.Client(), down.URL+"/bin?X-Amz-Signature=secret", part, 1000)
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("404: %v", err)
	}
	down.Close()
	err = Download(t.Context(), down.Client(), down.URL+"/bin?X-Amz-Signature=secret", part, 1000)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("unreachable: %v", err)
	}
}

// TestPlaceChecks: the binary is placed beside exe (0755) only when its
// size and SHA-256 are the release's; a mismatch leaves neither the new
// file nor the download.
func TestPlaceChecks(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "edgeagent")
	body := []byte("the new binary")
	part := filepath.Join(dir, "bin.part")
	if err := os.WriteFile(part, body, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Place(part, exe, release(body))
	if err != nil || got != exe+NewSuffix {
		t.Fatalf("place: %q, %v", got, err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, body) {
		t.Fatalf("placed %q", b)
	}
	if fi, _ := os.Stat(got); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o755 {
		t.Errorf("placed mode %v, want 0755", fi.Mode().Perm())
	}
	for name, rel := range map[string]protocol.Release{
		"digest": func() protocol.Release { r := release(body); r.SHA256 = strings.Repeat("0", 64); return r }(),
		"size":   func() protocol.Release { r := release(body); r.Size++; return r }(),
	} {
		if err := os.WriteFile(part, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Place(part, exe, rel); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), "SHA-256") {
			t.Errorf("%s mismatch: %v", name, err)
		}
		for _, f := range []string{exe + NewSuffix, part} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Errorf("%s mismatch left %s", name, filepath.Base(f))
			}
		}
	}
}

// TestSwapAndRollback: the new binary takes exe's name and the old one is
// kept as exe.prev; a rollback puts it back.
func TestSwapAndRollback(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "edgeagent")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	write(exe, "v1")
	write(exe+PrevSuffix, "v0")
	write(exe+NewSuffix, "v2")
	if err := Swap(exe, exe+NewSuffix); err != nil {
		t.Fatal(err)
	}
	if read(exe) != "v2" || read(exe+PrevSuffix) != "v1" {
		t.Fatalf("after swap: exe %q, prev %q", read(exe), read(exe+PrevSuffix))
	}
	if err := Rollback(exe); err != nil {
		t.Fatal(err)
	}
	if read(exe) != "v1" {
		t.Fatalf("after rollback: exe %q", read(exe))
	}
	if err := Rollback(exe); err == nil {
		t.Fatal("a rollback without a previous binary succeeded")
	}
}

// TestBeginTrial: the target binary counts its starts under trial; the
// start after MaxStarts puts the previous binary back and records
// rolled_back; so does a start after the health deadline; a hello
// accepted records done; another version starting records failed.
func TestBeginTrial(t *testing.T) {
	setup := func(t *testing.T) (dir, exe string) {
		dir = t.TempDir()
		exe = filepath.Join(dir, "edgeagent")
		for p, s := range map[string]string{exe: "v2", exe + PrevSuffix: "v1"} {
			if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := SaveRecord(dir, Record{State: protocol.UpdateRestarting, From: "v1.0.0", Target: "v2.0.0"}); err != nil {
			t.Fatal(err)
		}
		return dir, exe
	}
	now := time.Unix(1_700_000_000, 0)
	t.Run("crash loop", func(t *testing.T) {
		dir, exe := setup(t)
		for i := 1; i <= MaxStarts; i++ {
			tr, err := Begin(dir, exe, "v2.0.0", time.Minute, now)
			if err != nil || !tr.OnTrial || tr.Record.Starts != i || !tr.Deadline.Equal(now.Add(time.Minute)) {
				t.Fatalf("start %d: %+v, %v", i, tr, err)
			}
		}
		tr, err := Begin(dir, exe, "v2.0.0", time.Minute, now)
		if !errors.Is(err, ErrRolledBack) || tr.Record.State != protocol.UpdateRolledBack || !strings.Contains(tr.Record.Outcome, "started 2 times") {
			t.Fatalf("start %d: %+v, %v", MaxStarts+1, tr, err)
		}
		if b, _ := os.ReadFile(exe); string(b) != "v1" {
			t.Fatalf("exe after rollback: %q", b)
		}
		// The previous binary starts and reports the rollback.
		tr, err = Begin(dir, exe, "v1.0.0", time.Minute, now)
		if err != nil || tr.OnTrial || tr.Record.State != protocol.UpdateRolledBack || tr.Record.Status().Target != "v2.0.0" {
			t.Fatalf("previous binary's start: %+v, %v", tr, err)
		}
	})
	t.Run("health timeout", func(t *testing.T) {
		dir, exe := setup(t)
		if _, err := Begin(dir, exe, "v2.0.0", time.Minute, now); err != nil {
			t.Fatal(err)
		}
		tr, err := Begin(dir, exe, "v2.0.0", time.Minute, now.Add(time.Minute))
		if !errors.Is(err, ErrRolledBack) || !strings.Contains(tr.Record.Outcome, "health_timeout") {
			t.Fatalf("start after the deadline: %+v, %v", tr, err)
		}
	})
	t.Run("healthy", func(t *testing.T) {
		dir, exe := setup(t)
		tr, err := Begin(dir, exe, "v2.0.0", time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Healthy(dir, tr.Record, now); err != nil {
			t.Fatal(err)
		}
		tr, err = Begin(dir, exe, "v2.0.0", time.Minute, now.Add(time.Hour))
		if err != nil || tr.OnTrial || tr.Record.State != protocol.UpdateDone {
			t.Fatalf("start after done: %+v, %v", tr, err)
		}
	})
	t.Run("not swapped", func(t *testing.T) {
		dir, exe := setup(t)
		tr, err := Begin(dir, exe, "v1.0.0", time.Minute, now)
		if err != nil || tr.OnTrial || tr.Record.State != protocol.UpdateFailed {
			t.Fatalf("old version under a restarting record: %+v, %v", tr, err)
		}
	})
	if tr, err := Begin(t.TempDir(), "x", "v1.0.0", time.Minute, now); err != nil || tr.OnTrial || tr.Record.State != "" {
		t.Fatalf("no record: %+v, %v", tr, err)
	}
}

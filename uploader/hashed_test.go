package uploader

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// seenUploader records what it is asked to upload and stores nothing.
type seenUploader struct {
	mu   sync.Mutex
	seen []Artifact
}

func (u *seenUploader) Upload(_ context.Context, tok fencing.Token, a Artifact) (Result, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen = append(u.seen, a)
	return Result{Key: tok.ObjectKey(a.Name), Size: a.Size, SHA256: a.SHA256}, nil
}

// writePrivate writes b to a new 0600 file, as a capture spools one.
func writePrivate(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "capture-1-shot.png")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSpoolPutTakesWritersHash: a file whose writer hashed it as it wrote
// it (Hashed) is linked into the spool and not read again: its declared
// SHA-256 goes to the upload as it is, even a wrong one (here on purpose,
// to see that nothing hashed the file). The same file not marked Hashed is
// hashed, and the wrong SHA-256 is refused.
func TestSpoolPutTakesWritersHash(t *testing.T) {
	up := &seenUploader{}
	spool := newSpool(t, up, newMetrics(t), nil)
	ctx := testCtx(t)
	path := writePrivate(t, []byte("the bytes of a screenshot"))
	wrong := sum([]byte("other bytes"))

	if _, err := spool.Put(ctx, testToken, Artifact{Name: "a.png", Path: path, SHA256: wrong, Hashed: true}); err != nil {
		t.Fatalf("put of a file hashed by its writer: %v", err)
	}
	if len(up.seen) != 1 || up.seen[0].SHA256 != wrong || up.seen[0].Size != 25 {
		t.Fatalf("uploaded %+v; want the writer's SHA-256 taken as it is (the file not read)", up.seen)
	}
	_, err := spool.Put(ctx, testToken, Artifact{Name: "b.png", Path: path, SHA256: wrong})
	if !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("put of a file not marked hashed, with a wrong SHA-256: %v, want ErrChecksumMismatch", err)
	}
}

// TestSpoolPutHashedOnMinIO: through the spool to real MinIO, an artifact
// hashed by its writer is stored with that SHA-256 in its metadata, which
// is the SHA-256 of the stored bytes; a wrong one is caught by the storage
// (a single PUT carries it as its payload hash) and nothing is stored.
func TestSpoolPutHashedOnMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := srv.Client(t)
	m := newMetrics(t)
	s3, _ := faultyS3(t, srv, m, nil)
	spool := newSpool(t, s3, m, nil)
	ctx := testCtx(t)
	body := []byte("<hierarchy rotation=\"0\"/>")
	path := writePrivate(t, body)

	res, err := spool.Put(ctx, testToken, Artifact{Name: "ui.xml", Path: path, SHA256: sum(body), Hashed: true})
	if err != nil {
		t.Fatal(err)
	}
	n, stored := storedSHA256(t, raw, srv.Bucket, res.Key)
	obj, err := s3.Stat(ctx, res.Key)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(body)) || stored != sum(body) || obj.SHA256 != stored || res.SHA256 != stored {
		t.Fatalf("stored %d bytes hashing to %s, metadata sha256 %s, result %s; want all %s", n, stored, obj.SHA256, res.SHA256, sum(body))
	}

	_, err = spool.Put(ctx, testToken, Artifact{Name: "bad.xml", Path: path, SHA256: sum([]byte("x")), Hashed: true})
	if !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("put with a wrong writer's SHA-256: %v, want ErrChecksumMismatch from the storage", err)
	}
	if _, err := s3.Stat(ctx, testToken.ObjectKey("bad.xml")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stat of the refused object: %v, want ErrNotFound", err)
	}
}

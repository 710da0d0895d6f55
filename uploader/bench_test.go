package uploader

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
)

// BenchmarkUpload compares an upload of a recording-sized file with a bare
// minio-go PutObject of the same file to the same server, side by side.
func BenchmarkUpload(b *testing.B) {
	const size = 128 * mib
	// Default part size and parallelism: what the agent runs with.
	e := newEnv(b, func(o *S3Options) { o.PartSize = 0 })
	body := randomBytes(size, 9)
	path := filepath.Join(b.TempDir(), "rec.mp4")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		b.Fatal(err)
	}
	sha := sum(body)
	ctx := context.Background()
	n := 0
	b.Run("bare-minio-go", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			n++
			_, err = e.raw.PutObject(ctx, e.srv.Bucket, fmt.Sprintf("bare/%d", n), f, size, minio.PutObjectOptions{})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uploader/spooled", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			n++
			tok := testToken
			tok.JobID = fmt.Sprintf("bench-%d", n)
			if _, err := e.s.Upload(ctx, tok, Artifact{Name: "rec.mp4", Path: path, SHA256: sha, hashed: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, withSHA := range []bool{true, false} {
		b.Run(fmt.Sprintf("uploader/sha-given=%v", withSHA), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				n++
				tok := testToken
				tok.JobID = fmt.Sprintf("bench-%d", n)
				a := Artifact{Name: "rec.mp4", Path: path}
				if withSHA {
					a.SHA256 = sha
				}
				if _, err := e.s.Upload(ctx, tok, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package coordinator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/protocol"
)

// APKBucket stores the APKs operators add for install_app steps in the
// coordinator's bucket (docs/api.md, APKs).
type APKBucket interface {
	// PutAPK streams size bytes of r into the bucket, hashing them on the
	// way, and leaves them at protocol.APKObjectKey of their SHA-256, which
	// it returns. A body shorter or longer than size is refused and
	// nothing is kept.
	PutAPK(ctx context.Context, r io.Reader, size int64) (sha256 string, err error)
}

var _ APKBucket = (*S3Presigner)(nil)

// apkPartSize is the part size of an APK upload: minio-go buffers one part
// of a stream it cannot seek, so this bounds the memory of one upload.
const apkPartSize = 16 << 20

// apkIncoming is where an APK streams to before its hash is known.
const apkIncoming = "apks/incoming/"

// PutAPK streams the APK to a key of its own under apks/incoming/, hashing
// it, then copies it inside the bucket to apks/<sha256>.apk (unless an
// object is there already: the same hash is the same bytes) and removes
// the incoming object.
func (p *S3Presigner) PutAPK(ctx context.Context, r io.Reader, size int64) (string, error) {
	if size <= 0 || size > protocol.MaxAPKSize {
		return "", fmt.Errorf("put apk: size %d is not in 1…%d", size, protocol.MaxAPKSize)
	}
	tmp, sum, err := p.putIncoming(ctx, apkIncoming, ".apk", "application/vnd.android.package-archive", r, size)
	defer p.removeIncoming(ctx, tmp)
	if err != nil {
		return "", fmt.Errorf("put apk: %w", err)
	}
	key := protocol.APKObjectKey(sum)
	if _, err := p.c.StatObject(ctx, p.bucket, key, minio.StatObjectOptions{}); err == nil {
		return sum, nil
	} else if minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return "", fmt.Errorf("put apk: stat %s: %w", key, err)
	}
	if _, err := p.c.CopyObject(ctx, minio.CopyDestOptions{Bucket: p.bucket, Object: key},
		minio.CopySrcOptions{Bucket: p.bucket, Object: tmp}); err != nil {
		return "", fmt.Errorf("put apk: copy to %s: %w", key, err)
	}
	return sum, nil
}

// putIncoming streams size bytes of r to a key of its own under prefix,
// hashing them, and returns the key and their SHA-256. A body shorter or
// longer than size is refused. The caller removes the key
// (removeIncoming), also when it fails.
func (p *S3Presigner) putIncoming(ctx context.Context, prefix, ext, contentType string, r io.Reader, size int64) (tmp, sum string, err error) {
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	tmp = prefix + hex.EncodeToString(rnd[:]) + ext
	h := sha256.New()
	// One byte more than size is read, so that a longer body is noticed.
	body := &countingReader{r: io.TeeReader(io.LimitReader(r, size+1), h)}
	_, err = p.c.PutObject(ctx, p.bucket, tmp, io.LimitReader(body, size), size, minio.PutObjectOptions{
		ContentType: contentType, PartSize: apkPartSize,
	})
	if err != nil {
		return tmp, "", err
	}
	if body.n != size {
		return tmp, "", fmt.Errorf("the body has %d bytes, not the %d announced", body.n, size)
	}
	if n, _ := body.Read(make([]byte, 1)); n > 0 {
		return tmp, "", fmt.Errorf("the body is longer than the %d bytes announced", size)
	}
	return tmp, hex.EncodeToString(h.Sum(nil)), nil
}

// removeIncoming removes the object putIncoming wrote, also when the
// request went away mid-upload.
func (p *S3Presigner) removeIncoming(ctx context.Context, tmp string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = p.c.RemoveObject(ctx, p.bucket, tmp, minio.RemoveObjectOptions{})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// APKBucket is where the server stores APKs: its presigner's bucket, nil
// when the presigner cannot write APKs (none configured, or one of a
// test).
func (s *Server) APKBucket() APKBucket {
	b, _ := s.opts.Presigner.(APKBucket)
	return b
}

// maxPresignExpiry is the longest validity of a presigned URL that S3
// accepts (seven days).
const maxPresignExpiry = 7 * 24 * time.Hour

// errNoAPKDownload: an install_app step's APK cannot be handed to the
// agent (no storage to presign from, or no such APK recorded): the job
// cannot run anywhere, so its assign is not sent and it fails.
var errNoAPKDownload = errors.New("no apk download")

// apkDownloads presigns a GET of every APK the task installs, valid for
// the presign expiry or until the job's deadline, whichever is later (at
// most seven days).
func (s *Server) apkDownloads(ctx context.Context, task protocol.Task, deadlineMS int64) ([]protocol.APKDownload, error) {
	shas := task.APKs()
	if len(shas) == 0 {
		return nil, nil
	}
	as, ok := s.store.(jobstore.APKStore)
	if !ok || s.opts.Presigner == nil {
		return nil, fmt.Errorf("%w: this coordinator has no storage configured to hand out APKs", errNoAPKDownload)
	}
	valid := min(max(s.opts.PresignExpiry, time.Duration(deadlineMS)*time.Millisecond), maxPresignExpiry)
	out := make([]protocol.APKDownload, 0, len(shas))
	for _, sha := range shas {
		rec, err := as.GetAPK(ctx, sha)
		if errors.Is(err, jobstore.ErrAPKNotFound) {
			return nil, fmt.Errorf("%w: %w", errNoAPKDownload, err)
		}
		if err != nil {
			return nil, err
		}
		expires := time.Now().Add(valid)
		u, err := s.opts.Presigner.PresignGet(ctx, protocol.APKObjectKey(sha), valid)
		if err != nil {
			return nil, err
		}
		out = append(out, protocol.APKDownload{APK: rec.APK, URL: u, Expires: expires})
	}
	return out, nil
}

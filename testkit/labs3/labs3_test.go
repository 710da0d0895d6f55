package labs3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.uber.org/goleak"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/uploader"
)

const mib = 1 << 20

var tok = fencing.Token{JobID: "job-7", Owner: "lab-agent/boot-1", Generation: 2}

func start(t *testing.T) (*Server, *uploader.S3, *minio.Client) {
	t.Helper()
	s, err := Start(Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	opts := s.UploaderOptions()
	opts.PartSize = 5 * mib
	up, err := uploader.NewS3(opts)
	if err != nil {
		t.Fatalf("NewS3: %v", err)
	}
	raw, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region})
	if err != nil {
		t.Fatal(err)
	}
	return s, up, raw
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func data(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func get(t *testing.T, raw *minio.Client, bucket, key string) []byte {
	t.Helper()
	o, err := raw.GetObject(ctxT(t), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return b
}

func TestUploaderStampsAndListing(t *testing.T) {
	s, up, raw := start(t)
	ctx := ctxT(t)
	small := []byte(`<hierarchy/>`)
	big := data(12*mib+5, 1)
	if _, err := up.Upload(ctx, tok, uploader.Artifact{Name: "ui.xml", ContentType: "application/xml", Body: bytes.NewReader(small)}); err != nil {
		t.Fatalf("Upload small: %v", err)
	}
	res, err := up.Upload(ctx, tok, uploader.Artifact{Name: "rec.mp4", ContentType: "video/mp4", Body: bytes.NewReader(big)})
	if err != nil {
		t.Fatalf("Upload big: %v", err)
	}
	if got := get(t, raw, s.Bucket, res.Key); !bytes.Equal(got, big) {
		t.Fatalf("multipart content differs: %d bytes", len(got))
	}

	objs, err := up.List(ctx, "jobs/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(objs) != 2 {
		t.Fatalf("List = %+v", objs)
	}
	for _, o := range objs {
		if o.Token != tok {
			t.Errorf("%s: token %v, want %v", o.Key, o.Token, tok)
		}
		want := map[string][]byte{"jobs/job-7/g2/ui.xml": small, "jobs/job-7/g2/rec.mp4": big}[o.Key]
		if o.SHA256 != hexSum(want) || o.Size != int64(len(want)) {
			t.Errorf("%s: sha256 %s size %d, want %s %d", o.Key, o.SHA256, o.Size, hexSum(want), len(want))
		}
	}
	if objs[1].ContentType != "application/xml" {
		t.Errorf("content type %q", objs[1].ContentType)
	}
}

func TestIfNoneMatch(t *testing.T) {
	for name, size := range map[string]int{"single": 100, "multipart": 11 * mib} {
		t.Run(name, func(t *testing.T) {
			s, up, raw := start(t)
			ctx := ctxT(t)
			first := data(size, 1)
			res, err := up.Upload(ctx, tok, uploader.Artifact{Name: "a.bin", Body: bytes.NewReader(first)})
			if err != nil {
				t.Fatalf("Upload: %v", err)
			}
			if _, err := up.Upload(ctx, tok, uploader.Artifact{Name: "a.bin", Body: bytes.NewReader(data(size, 2))}); !errors.Is(err, uploader.ErrExists) {
				t.Fatalf("overwrite: err = %v, want ErrExists", err)
			}
			if got := get(t, raw, s.Bucket, res.Key); !bytes.Equal(got, first) {
				t.Fatal("original overwritten")
			}
			again, err := up.Upload(ctx, tok, uploader.Artifact{Name: "a.bin", Body: bytes.NewReader(first)})
			if err != nil || !again.Existed {
				t.Fatalf("retry = %+v, %v; want Existed", again, err)
			}
			// gofakes3 answers NoSuchUpload for a bucket that never had a
			// multipart upload.
			for u := range raw.ListIncompleteUploads(ctx, s.Bucket, "", true) {
				if u.Err != nil && minio.ToErrorResponse(u.Err).Code == "NoSuchUpload" {
					continue
				}
				t.Errorf("incomplete upload left: %+v", u)
			}
		})
	}
}

// intruderReader writes the key through another client once it has handed
// out after bytes, i.e. while the multipart upload is in progress.
type intruderReader struct {
	r     io.Reader
	n     int
	after int
	write func()
}

func (i *intruderReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	i.n += n
	if i.n >= i.after && i.write != nil {
		i.write()
		i.write = nil
	}
	return n, err
}

func TestMultipartCompleteDoesNotOverwrite(t *testing.T) {
	s, up, raw := start(t)
	ctx := ctxT(t)
	key := tok.ObjectKey("race.bin")
	intruder := []byte("intruder")
	body := data(12*mib, 3)
	r := &intruderReader{r: bytes.NewReader(body), after: 6 * mib, write: func() {
		if _, err := raw.PutObject(ctx, s.Bucket, key, bytes.NewReader(intruder), int64(len(intruder)), minio.PutObjectOptions{}); err != nil {
			t.Errorf("intruder: %v", err)
		}
	}}
	_, err := up.Upload(ctx, tok, uploader.Artifact{Name: "race.bin", Body: struct{ io.Reader }{r}, SHA256: hexSum(body)})
	if !errors.Is(err, uploader.ErrExists) {
		t.Fatalf("Upload: err = %v, want ErrExists", err)
	}
	if got := get(t, raw, s.Bucket, key); !bytes.Equal(got, intruder) {
		t.Fatalf("completion overwrote the object (%d bytes)", len(got))
	}
}

// TestStockClient checks what a plain minio-go client gets over HTTP, where
// it sends aws-chunked bodies.
func TestStockClient(t *testing.T) {
	s, _, raw := start(t)
	ctx := ctxT(t)
	body := data(12*mib+1, 4)
	for _, size := range []int64{int64(len(body)), -1} {
		if _, err := raw.PutObject(ctx, s.Bucket, "stock", struct{ io.Reader }{bytes.NewReader(body)}, size, minio.PutObjectOptions{PartSize: 5 * mib}); err != nil {
			t.Fatalf("PutObject size %d: %v", size, err)
		}
		if got := get(t, raw, s.Bucket, "stock"); !bytes.Equal(got, body) {
			t.Fatalf("size %d: stored %d bytes, want %d", size, len(got), len(body))
		}
	}
	small := []byte("small")
	if _, err := raw.PutObject(ctx, s.Bucket, "small", bytes.NewReader(small), 5, minio.PutObjectOptions{ContentEncoding: "gzip"}); err != nil {
		t.Fatal(err)
	}
	info, err := raw.StatObject(ctx, s.Bucket, "small", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if enc := info.Metadata.Get("Content-Encoding"); enc != "gzip" {
		t.Errorf("Content-Encoding = %q, want gzip", enc)
	}
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	_, err = raw.PutObject(ctx, s.Bucket, "small", bytes.NewReader(small), 5, opts)
	if r := minio.ToErrorResponse(err); r.StatusCode != http.StatusPreconditionFailed || r.Code != "PreconditionFailed" {
		t.Errorf("conditional PUT over existing: %v (status %d, code %q)", err, r.StatusCode, r.Code)
	}
}

func TestChunkedBody(t *testing.T) {
	sig := ";chunk-signature=" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, in, want string
		bad            bool
	}{
		{"signed", "5" + sig + "\r\nhello\r\n3" + sig + "\r\nabc\r\n0" + sig + "\r\n\r\n", "helloabc", false},
		{"unsigned-trailer", "5\r\nhello\r\n0\r\nx-amz-checksum-crc32c:AAAAAA==\r\n\r\n", "hello", false},
		{"empty", "0" + sig + "\r\n\r\n", "", false},
		{"truncated", "5" + sig + "\r\nhel", "", true},
		{"bad-size", "zz\r\nhello\r\n", "", true},
		{"bad-end", "5\r\nhelloXX0\r\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPut, "http://x/b/k", strings.NewReader(tc.in))
			req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
			req.Header.Set("X-Amz-Decoded-Content-Length", "8")
			req.Header.Set("Content-Encoding", "aws-chunked")
			if err := decodeChunked(req); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(req.Body)
			if tc.bad {
				if err == nil {
					t.Errorf("read %q, want an error", got)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("read %q, %v; want %q", got, err, tc.want)
			}
			if req.Header.Get("Content-Encoding") != "" || req.ContentLength != 8 {
				t.Errorf("headers not rewritten: %v, length %d", req.Header, req.ContentLength)
			}
		})
	}
}

func TestCloseStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := Start(Options{Bucket: "other"})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Head("http://" + s.Endpoint + "/other")
	if err != nil {
		t.Fatalf("head bucket: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("head bucket: %s", resp.Status)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	client.CloseIdleConnections()
	if _, err := client.Head("http://" + s.Endpoint + "/other"); err == nil {
		t.Error("server still answers after Close")
	}
}

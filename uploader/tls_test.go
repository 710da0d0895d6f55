package uploader_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/uploader"
)

// TestUploadOverTLS runs a multipart upload against an HTTPS endpoint, where
// parts go as UNSIGNED-PAYLOAD and the single PUT still declares its hash.
func TestUploadOverTLS(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("tls"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var payloads []string
	inner := gofakes3.New(backend).Server()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			mu.Lock()
			payloads = append(payloads, r.URL.Query().Get("partNumber")+"="+r.Header.Get("X-Amz-Content-Sha256"))
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()

	up, err := uploader.NewS3(uploader.S3Options{
		Endpoint:  strings.TrimPrefix(srv.URL, "https://"),
		Secure:    true,
		Bucket:    "tls",
		AccessKey: "a",
		SecretKey: "s",
		PartSize:  uploader.MinPartSize,
		Transport: srv.Client().Transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok := fencing.Token{JobID: "j", Owner: "a/b", Generation: 1}
	big := bytes.Repeat([]byte("0123456789"), 1<<20+7)
	if _, err := up.Upload(ctx, tok, uploader.Artifact{Name: "big", Body: bytes.NewReader(big)}); err != nil {
		t.Fatalf("Upload big: %v", err)
	}
	if _, err := up.Upload(ctx, tok, uploader.Artifact{Name: "small", Body: strings.NewReader("hi")}); err != nil {
		t.Fatalf("Upload small: %v", err)
	}
	obj, err := up.Stat(ctx, tok.ObjectKey("big"))
	if err != nil || obj.Size != int64(len(big)) || obj.Token != tok {
		t.Fatalf("Stat = %+v, %v", obj, err)
	}
	const hiSHA = "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"
	want := "1=UNSIGNED-PAYLOAD 2=UNSIGNED-PAYLOAD 3=UNSIGNED-PAYLOAD =" + hiSHA
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(payloads) // parts go up in parallel
	if got := strings.Join(payloads, " "); got != want {
		t.Errorf("payload hashes sent:\n%s\nwant\n%s", got, want)
	}
}

package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestMinIO(t *testing.T) {
	a := MinIO(t)
	b := MinIO(t)
	if a.Endpoint != b.Endpoint {
		t.Errorf("two calls started two servers: %s and %s", a.Endpoint, b.Endpoint)
	}
	if a.Bucket == b.Bucket {
		t.Errorf("two calls share bucket %s", a.Bucket)
	}

	resp, err := http.Get("http://" + a.Endpoint + "/minio/health/live")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := a.Client(t)
	for _, bucket := range []string{a.Bucket, b.Bucket} {
		ok, err := c.BucketExists(ctx, bucket)
		if err != nil || !ok {
			t.Fatalf("bucket %s exists = %v, %v", bucket, ok, err)
		}
		n := 0
		for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			n++
		}
		if n != 0 {
			t.Errorf("fresh bucket %s holds %d objects", bucket, n)
		}
	}

	body := []byte("hello")
	if _, err := c.PutObject(ctx, a.Bucket, "k", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	obj, err := c.GetObject(ctx, a.Bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("get = %q, %v; want %q", got, err, body)
	}
}

// TestMinIOIfNoneMatch checks that the server build refuses a PUT with
// If-None-Match: * over an existing object, which artifact uploads rely on.
func TestMinIOIfNoneMatch(t *testing.T) {
	m := MinIO(t)
	c := m.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(body string) error {
		var opts minio.PutObjectOptions
		opts.SetMatchETagExcept("*")
		_, err := c.PutObject(ctx, m.Bucket, "once", bytes.NewReader([]byte(body)), int64(len(body)), opts)
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("first put: %v", err)
	}
	err := put("second")
	if got := minio.ToErrorResponse(err).StatusCode; got != http.StatusPreconditionFailed {
		t.Fatalf("second put: status %d (%v), want 412", got, err)
	}
}

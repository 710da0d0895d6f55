package testenv

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// TestMinIOProcess stops a dedicated server and starts it again: it is down
// in between, and back on the same address with the same data.
func TestMinIOProcess(t *testing.T) {
	m := StartMinIOProcess(t)
	c := m.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.PutObject(ctx, m.Bucket, "k", bytes.NewReader([]byte("kept")), 4, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	m.Stop()
	m.Stop() // a no-op
	client := &http.Client{Timeout: time.Second}
	if resp, err := client.Get("http://" + m.Endpoint + "/minio/health/live"); err == nil {
		resp.Body.Close()
		t.Fatalf("server still answers after Stop")
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	info, err := c.StatObject(ctx, m.Bucket, "k", minio.StatObjectOptions{})
	if err != nil || info.Size != 4 {
		t.Fatalf("after restart: stat = %+v, %v", info, err)
	}
}

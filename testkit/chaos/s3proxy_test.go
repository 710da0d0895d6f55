package chaos

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/testkit/labs3"
	"github.com/edgeagent/edgeagent/uploader"
)

type s3Control struct {
	pauseGate
	mu   sync.Mutex
	hook func(rec *S3Record) Verdict
}

func (c *s3Control) setHook(h func(rec *S3Record) Verdict) {
	c.mu.Lock()
	c.hook = h
	c.mu.Unlock()
}

func (c *s3Control) S3Hook(_ *S3Link, rec *S3Record) Verdict {
	c.mu.Lock()
	h := c.hook
	c.mu.Unlock()
	if h == nil {
		return Verdict{}
	}
	return h(rec)
}

func TestS3Link(t *testing.T) {
	srv, err := labs3.Start(labs3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctl := &s3Control{}
	var outage storageFaults
	rec := NewRecorder(1, Plan{}, time.Now())
	l, err := NewS3Link(srv.Endpoint, srv.Bucket, ctl, &outage, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.setName("a/1")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	opts := srv.UploaderOptions()
	opts.Endpoint = l.Endpoint()
	opts.Transport = stampTransport{tr}
	opts.Retry = uploader.RetryPolicy{Attempts: 2, Initial: time.Millisecond, Max: time.Millisecond}
	up, err := uploader.NewS3(opts)
	if err != nil {
		t.Fatal(err)
	}
	tok := fencing.Token{JobID: "j1", Owner: "a/1", Generation: 3}
	put := func(name string) error {
		_, err := up.Upload(context.Background(), tok, uploader.Artifact{Name: name, Body: bytes.NewReader([]byte("content")), ContentType: "text/plain"})
		return err
	}

	before := time.Now()
	if err := put("one.txt"); err != nil {
		t.Fatalf("upload through the link: %v", err)
	}
	var seen *S3Record
	for _, r := range rec.History().S3 {
		if r.Kind == s3Put {
			seen = r
		}
	}
	if seen == nil || seen.Token != tok || seen.Status != http.StatusOK || !seen.Live || seen.Read.Before(before) {
		t.Fatalf("put recorded as %+v, want token %s, 200, live, stamped by the uploader", seen, tok)
	}

	outage.set("503")
	if err := put("two.txt"); !errors.Is(err, uploader.ErrUnavailable) {
		t.Errorf("upload during a 503 outage: %v, want ErrUnavailable", err)
	}
	outage.set("")
	outage.set("reset")
	if err := put("three.txt"); err == nil {
		t.Error("upload went through a reset outage")
	}
	outage.set("")

	ctl.pause()
	done := make(chan error, 1)
	go func() { done <- put("four.txt") }()
	select {
	case err := <-done:
		t.Fatalf("upload finished while paused: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	ctl.unpause()
	if err := <-done; err != nil {
		t.Errorf("upload after the pause: %v", err)
	}

	ctl.setHook(func(rec *S3Record) Verdict { return Verdict{Drop: rec.Kind == s3Put} })
	if err := put("five.txt"); err == nil {
		t.Error("a dropped upload succeeded")
	}
	ctl.setHook(nil)

	l.Kill()
	if err := put("six.txt"); err == nil {
		t.Error("upload through a killed link succeeded")
	}
	objs, err := uploader.NewS3(srv.UploaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	list, err := objs.List(context.Background(), "jobs/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list {
		keys = append(keys, o.Key)
	}
	if len(keys) != 2 || keys[0] != tok.ObjectKey("four.txt") || keys[1] != tok.ObjectKey("one.txt") {
		t.Errorf("stored %v, want only one.txt and four.txt", keys)
	}
}

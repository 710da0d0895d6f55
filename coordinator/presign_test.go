package coordinator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

func put(t *testing.T, u string, headers map[string]string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestPresignedUpload: against a real MinIO, the
// upload verb gives the current token a presigned PUT; a plain HTTP PUT
// with the returned headers lands the object with every stamp; a second PUT
// to the same URL gets 412; leaving out or changing a signed header is
// refused; a stale token gets 409 and no URL. The artifact then registers
// and the accepted result's manifest is its generation's.
func TestPresignedUpload(t *testing.T) {
	t.Parallel()
	mio := testenv.MinIO(t)
	ns := testenv.NATS(t)
	store := openSQLite(t)
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: mio.Endpoint, Region: "us-east-1", Bucket: mio.Bucket, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions(t, "c1")
	opts.Presigner = p
	opts.PresignExpiry = 5 * time.Minute
	c := startCoordinator(t, ns.ClientURL(), store, opts)

	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold },
	})
	if mode := a.HelloReply().UploadMode; mode != "presigned" {
		t.Fatalf("hello reply upload mode %q, want presigned", mode)
	}
	submit(t, store, "job-p", protocol.DeviceSelector{})
	waitAssign(t, a, "job-p", 5*time.Second)
	tok := a.Assigns()[0]
	ctx := context.Background()

	body := []byte("\x89PNG fake screenshot")
	sum := sha256.Sum256(body)
	up := protocol.Upload{Token: tok, Name: "shot.png", Size: int64(len(body)), ContentType: "image/png", SHA256: hex.EncodeToString(sum[:])}
	var rep protocol.UploadReply
	if err := a.Request(ctx, protocol.VerbUpload, up, &rep); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if rep.Key != "jobs/job-p/g1/shot.png" || rep.Method != http.MethodPut || time.Until(rep.Expires) < 4*time.Minute {
		t.Fatalf("upload reply %+v", rep)
	}
	wantHeaders := map[string]string{
		"If-None-Match": "*", "Content-Type": "image/png",
		"x-amz-meta-job-id": "job-p", "x-amz-meta-owner": tok.Owner, "x-amz-meta-generation": "1",
		"x-amz-meta-sha256": up.SHA256,
	}
	for k, v := range wantHeaders {
		if rep.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, rep.Headers[k], v)
		}
	}
	u, err := url.Parse(rep.URL)
	if err != nil {
		t.Fatal(err)
	}
	signed := strings.Split(u.Query().Get("X-Amz-SignedHeaders"), ";")
	for _, h := range []string{"if-none-match", "content-type", "x-amz-meta-job-id", "x-amz-meta-owner", "x-amz-meta-generation", "x-amz-meta-sha256", "x-amz-checksum-sha256"} {
		if !slices.Contains(signed, h) {
			t.Errorf("%s is not a signed header (%v)", h, signed)
		}
	}
	if strings.Contains(rep.URL, mio.SecretKey) {
		t.Fatal("the URL carries the secret key")
	}

	// Leaving out a signed header, or changing one, is refused.
	without := map[string]string{}
	for k, v := range rep.Headers {
		if k != "If-None-Match" {
			without[k] = v
		}
	}
	if resp := put(t, rep.URL, without, body); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT without If-None-Match: %s, want a refusal", resp.Status)
	}
	changed := map[string]string{}
	for k, v := range rep.Headers {
		changed[k] = v
	}
	changed["x-amz-meta-generation"] = "7"
	if resp := put(t, rep.URL, changed, body); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT with another generation stamp: %s, want a refusal", resp.Status)
	}
	if _, err := mio.Client(t).StatObject(ctx, mio.Bucket, rep.Key, minio.StatObjectOptions{}); minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
		t.Fatalf("an object landed from a refused PUT: %v", err)
	}

	// Content other than the authorised is refused by the storage itself.
	if resp := put(t, rep.URL, rep.Headers, []byte("\x89PNG other content!")); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT of other content: %s, want 400", resp.Status)
	}

	// The PUT as told lands, with every stamp.
	resp := put(t, rep.URL, rep.Headers, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %s", resp.Status)
	}
	etag := strings.Trim(resp.Header.Get("ETag"), `"`)
	info, err := mio.Client(t).StatObject(ctx, mio.Bucket, rep.Key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	md := map[string]string{}
	for k, v := range info.UserMetadata {
		md[strings.ToLower(k)] = v
	}
	stamped, err := fencing.FromMetadata(info.UserMetadata)
	if err != nil || stamped != tok || md["sha256"] != up.SHA256 || info.ContentType != "image/png" || info.Size != int64(len(body)) {
		t.Fatalf("stored object: stamps %v (%v), metadata %v, type %q, size %d", stamped, err, info.UserMetadata, info.ContentType, info.Size)
	}

	// A second PUT to the same URL would overwrite: 412.
	if resp := put(t, rep.URL, rep.Headers, []byte("other content")); resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("second PUT: %s, want 412", resp.Status)
	}

	// The upload registers and the result's manifest is this generation's.
	if err := a.Request(ctx, protocol.VerbArtifact, protocol.Artifact{Token: tok, Name: "shot.png", Key: rep.Key, Size: int64(len(body)),
		SHA256: up.SHA256, ContentType: "image/png", ETag: etag}, &protocol.Ack{}); err != nil {
		t.Fatalf("register: %v", err)
	}

	// Reassigned: the old token gets 409 and no URL.
	b := coordtest.Start(t, coordtest.Options{
		ID: "pc-b", URL: ns.ClientURL(), Devices: []protocol.Device{phone("B1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold },
	})
	testenv.Eventually(t, 5*time.Second, "pc-b online", func() bool {
		_, err := c.srv.Reassign(ctx, "job-p", "pc-b", true)
		return err == nil
	})
	var stale protocol.UploadReply
	err = a.Request(ctx, protocol.VerbUpload, protocol.Upload{Token: tok, Name: "late.png", Size: 1, ContentType: "image/png", SHA256: up.SHA256}, &stale)
	if !errors.Is(err, fencing.ErrStale) || stale.URL != "" {
		t.Fatalf("upload with a stale token: %+v, %v; want 409 and no URL", stale, err)
	}
	evs, _ := store.WriteEvents(ctx, "job-p")
	var ups []string
	for _, e := range evs {
		if e.Verb == jobstore.VerbUpload {
			ups = append(ups, e.Detail+map[bool]string{true: " accepted", false: " refused"}[e.Accepted])
		}
	}
	if !slices.Equal(ups, []string{"shot.png accepted", "late.png refused"}) {
		t.Fatalf("upload events %v", ups)
	}
	if got := metricValue(t, c.srv.Registry(), "stale_token_rejected_total", map[string]string{"verb": "upload"}); got != 1 {
		t.Fatalf("stale_token_rejected_total{verb=upload} = %v", got)
	}

	// The new owner uploads under its own generation and finishes; its
	// manifest does not list generation 1's object.
	testenv.Eventually(t, 5*time.Second, "assign at B", func() bool { return len(b.Assigns()) == 1 })
	tokB := b.Assigns()[0]
	var repB protocol.UploadReply
	if err := b.Request(ctx, protocol.VerbUpload, protocol.Upload{Token: tokB, Name: "shot.png", Size: int64(len(body)), ContentType: "image/png", SHA256: up.SHA256}, &repB); err != nil {
		t.Fatalf("upload of B: %v", err)
	}
	if repB.Key != "jobs/job-p/g2/shot.png" {
		t.Fatalf("B's key %s", repB.Key)
	}
	if resp := put(t, repB.URL, repB.Headers, body); resp.StatusCode != http.StatusOK {
		t.Fatalf("B's PUT: %s", resp.Status)
	}
	if err := b.Request(ctx, protocol.VerbArtifact, protocol.Artifact{Token: tokB, Name: "shot.png", Key: repB.Key, Size: int64(len(body)),
		SHA256: up.SHA256, ContentType: "image/png"}, &protocol.Ack{}); err != nil {
		t.Fatalf("register B: %v", err)
	}
	var res protocol.ResultReply
	if err := b.Request(ctx, protocol.VerbResult, protocol.Result{Token: tokB, Result: []byte(`{}`)}, &res); err != nil {
		t.Fatalf("result of B: %v", err)
	}
	if !res.Accepted || !slices.Equal(res.Manifest, []string{repB.Key}) {
		t.Fatalf("result reply %+v", res)
	}
}

// TestUploadWithoutStorage: with no storage configured the upload verb
// answers 503 and hello says agents upload directly.
func TestUploadWithoutStorage(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	store := openSQLite(t)
	startCoordinator(t, ns.ClientURL(), store, fastOptions(t, "c1"))
	a := coordtest.Start(t, coordtest.Options{
		ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold },
	})
	if mode := a.HelloReply().UploadMode; mode != "direct" {
		t.Fatalf("upload mode %q, want direct", mode)
	}
	submit(t, store, "j", protocol.DeviceSelector{})
	waitAssign(t, a, "j", 5*time.Second)
	err := a.Request(context.Background(), protocol.VerbUpload, protocol.Upload{Token: a.Assigns()[0], Name: "x.png",
		SHA256: strings.Repeat("0", 64), ContentType: "image/png"}, &protocol.UploadReply{})
	if !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("upload without storage: %v, want 503", err)
	}
}

package coordinator_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestAssignCarriesAPKDownloads: the coordinator stores an APK in the
// real bucket (PutAPK), and the assign of a job that installs it twice
// carries one presigned GET of it, with the recorded package and
// versionCode, which a plain HTTP GET without credentials downloads byte
// for byte. Without storage to presign from, the job is not assigned but
// fails at once as the job's own failure, naming why.
func TestAssignCarriesAPKDownloads(t *testing.T) {
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
	apk := bytes.Repeat([]byte("PK\x03\x04 apk bytes "), 1000)
	sum, err := p.PutAPK(t.Context(), bytes.NewReader(apk), int64(len(apk)))
	if h := sha256.Sum256(apk); err != nil || sum != hex.EncodeToString(h[:]) {
		t.Fatalf("put apk: %s, %v", sum, err)
	}
	if _, err := p.PutAPK(t.Context(), bytes.NewReader(apk), int64(len(apk))+1); err == nil {
		t.Fatal("put apk with a body shorter than announced: no error")
	}
	as := store.(jobstore.APKStore)
	rec := jobstore.APKRecord{APK: protocol.APK{SHA256: sum, Size: int64(len(apk)), Package: "com.example.shop", VersionCode: 530}, AddedBy: "ops"}
	if _, _, err := as.AddAPK(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	installTwice := protocol.Task{Steps: []protocol.Step{
		{Op: protocol.OpInstallApp, APK: sum}, {Op: protocol.OpWake}, {Op: protocol.OpInstallApp, APK: sum},
	}}

	opts := fastOptions(t, "c1")
	opts.Presigner = p
	startCoordinator(t, ns.ClientURL(), store, opts)
	a := coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{phone("A1")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold }})
	if _, err := store.Submit(t.Context(), jobstore.JobSpec{ID: "install", Task: installTwice}); err != nil {
		t.Fatal(err)
	}
	waitAssign(t, a, "install", 5*time.Second)
	msgs := a.AssignMessages()
	if len(msgs) != 1 || len(msgs[0].APKs) != 1 {
		t.Fatalf("assigns %+v, want one with one APK", msgs)
	}
	d := msgs[0].APKs[0]
	if d.APK != rec.APK || !strings.Contains(d.URL, "X-Amz-Signature=") || !d.Expires.After(time.Now()) {
		t.Fatalf("download %+v, want %+v presigned", d, rec.APK)
	}
	resp, err := http.Get(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, apk) {
		t.Fatalf("GET of the presigned URL: %s, %d bytes, %v", resp.Status, len(got), err)
	}

	// Another coordinator, without storage, on its own store.
	ns2 := testenv.NATS(t)
	store2 := openSQLite(t)
	if _, _, err := store2.(jobstore.APKStore).AddAPK(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	startCoordinator(t, ns2.ClientURL(), store2, fastOptions(t, "c2"))
	b := coordtest.Start(t, coordtest.Options{ID: "pc-b", URL: ns2.ClientURL(), Devices: []protocol.Device{phone("B1")}})
	if _, err := store2.Submit(t.Context(), jobstore.JobSpec{ID: "nowhere", Task: installTwice}); err != nil {
		t.Fatal(err)
	}
	j := waitStatus(t, store2, "nowhere", jobstore.StatusFailed, 10*time.Second)
	if len(j.AttemptEnds) != 1 || j.AttemptEnds[0].Class != protocol.FailClassJob || !strings.Contains(j.FailReason, "no storage configured to hand out APKs") {
		t.Fatalf("job without storage: %q %+v", j.FailReason, j.AttemptEnds)
	}
	if len(b.AssignMessages()) != 0 {
		t.Fatalf("the job was assigned: %+v", b.AssignMessages())
	}
}

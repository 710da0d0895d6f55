package ui_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/coordinator"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/ui"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// syncBuffer is a log destination the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestJobPageLogsNoPresignedURL: the storage server does not answer when
// the job page reads an operation log through its presigned URL. The
// page says so, and the warning the dashboard logs names the object's
// host and path but not the URL's query: no signature, no credential.
func TestJobPageLogsNoPresignedURL(t *testing.T) {
	dead := testenv.FreeAddr(t) // nothing listens there
	p, err := coordinator.NewS3Presigner(coordinator.S3Options{
		Endpoint: dead, Region: "us-east-1", Bucket: "bucket", AccessKey: "AKIDEXAMPLE", SecretKey: "secret-key-example",
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	e := newEnv(t, "sqlite", func(o *ui.Options) {
		o.Presigner = p
		o.Log = zerolog.New(&logs)
	})
	dev := ready("A1", "Pixel 7")
	e.hello("agent-a", dev)
	e.submit("j1", "p1", protocol.DeviceSelector{Serial: "A1"})
	l := e.claim("agent-a", dev)
	if err := e.store.RegisterArtifact(t.Context(), l.Token, jobstore.ArtifactRecord{
		Name: ui.OpLogName, Key: l.Token.ObjectKey(ui.OpLogName), Size: 10, SHA256: strings.Repeat("ab", 32), ContentType: "application/x-ndjson",
	}); err != nil {
		t.Fatal(err)
	}

	c := e.login(e.token("ops", []string{"p1"}, "read"))
	r := e.get(c, "/ui/jobs/j1")
	if r.status != 200 || !strings.Contains(r.body, "the storage server did not answer for the operation log") {
		t.Fatalf("job page: %d\n%s\nlog:\n%s", r.status, r.body, logs.String())
	}
	line := ""
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "ui: read operation log") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no warning logged for the unreadable operation log:\n%s", logs.String())
	}
	if !strings.Contains(line, dead+"/bucket/jobs/j1/g1/"+ui.OpLogName) {
		t.Errorf("the warning does not name the object: %s", line)
	}
	for _, secret := range []string{"X-Amz-Signature", "X-Amz-Credential", "AKIDEXAMPLE", "?"} {
		if strings.Contains(line, secret) {
			t.Errorf("the warning holds %q: %s", secret, line)
		}
	}
}

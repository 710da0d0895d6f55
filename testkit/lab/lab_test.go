package lab

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestRunAll(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"))
	var out bytes.Buffer
	if err := RunAll(context.Background(), Options{LeaseTTL: 2 * time.Second}, &out); err != nil {
		t.Fatalf("RunAll: %v\n%s", err, out.String())
	}
	for _, want := range []string{"SUCCEEDED", "settings.png", "oplog.jsonl", "fenced", "unfenced"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStaleWorkerContrast checks both cases' figures as read from the store:
// without the token every late write lands; with it none does.
func TestStaleWorkerContrast(t *testing.T) {
	e, err := Start(context.Background(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	unf, err := StaleWorker(ctx, e, 20, false)
	if err != nil {
		t.Fatal(err)
	}
	if unf.AAccepted != 20 || unf.Overwritten != 20 || unf.FinalOld != 20 || unf.FinalNew != 0 || unf.DupAccepted != 20 {
		t.Errorf("unfenced row %+v: want every late write accepted and every new result overwritten", unf)
	}
	if unf.Check() == nil {
		t.Error("Check accepted the unfenced row")
	}
	f, err := StaleWorker(ctx, e, 20, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Errorf("fenced row %+v: %v", f, err)
	}
	if f.BAccepted != 20 || f.DupAccepted != 0 || f.Overwritten != 0 {
		t.Errorf("fenced row %+v", f)
	}
}

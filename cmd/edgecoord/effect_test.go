package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/sqlitestore"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

// TestEffectCommands lists an effect in doubt with its evidence, shows it,
// and resolves it, which queues its job again.
func TestEffectCommands(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "jobs.db")
	path := writeConfig(t, fmt.Sprintf("coordinator_id: fx\nnats:\n  url: nats://127.0.0.1:4222\nstore:\n  driver: sqlite\n  path: %s\nmetrics:\n  listen: \"\"\n", db))
	st, err := sqlitestore.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	task := protocol.Task{Steps: []protocol.Step{{Op: protocol.OpTap, X: 1, Y: 2, Effect: &protocol.EffectSpec{Key: "order-9/submit"}}}}
	if _, err := st.Submit(ctx, jobstore.JobSpec{ID: "j", Task: task}); err != nil {
		t.Fatal(err)
	}
	a, err := st.Claim(ctx, "j", fencing.Owner("pc-a", "1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReserveEffect(ctx, a.Token, jobstore.EffectIntent{Key: "order-9/submit", Step: 1, Op: protocol.OpTap}); err != nil {
		t.Fatal(err)
	}
	// The reserving generation registered what the phone showed after the
	// step, then lost its lease before the receipt.
	shot := a.Token.ObjectKey("effect-001-after.png")
	if err := st.RegisterArtifact(ctx, a.Token, jobstore.ArtifactRecord{Name: "effect-001-after.png", Key: shot, SHA256: "s", ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	b, err := st.Reassign(ctx, "j", fencing.Owner("pc-b", "1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReserveEffect(ctx, b.Token, jobstore.EffectIntent{Key: "order-9/submit", Step: 1, Op: protocol.OpTap}); err != nil {
		t.Fatal(err)
	}
	doubt := b.Token.ObjectKey("effect-001-doubt.png")
	if _, err := st.AddEffectEvidence(ctx, b.Token, "order-9/submit", []string{doubt}); err != nil {
		t.Fatal(err)
	}
	if err := st.Fail(ctx, b.Token, jobstore.Failure{Reason: jobstore.ReasonNeedsDecision + ": effect order-9/submit is in doubt"}); err != nil {
		t.Fatal(err)
	}

	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(args, "-c", path)...)
	}
	code, out, stderr := cli("effect", "list")
	if code != 0 || !strings.Contains(out, "order-9/submit") || !strings.Contains(out, "in_doubt") ||
		!strings.Contains(out, "needs a decision: 2 evidence") {
		t.Fatalf("effect list: %d\n%s%s", code, out, stderr)
	}
	code, out, _ = cli("effect", "list", "--state", "in_doubt", "--json")
	var views []effectView
	if code != 0 || json.Unmarshal([]byte(out), &views) != nil || len(views) != 1 {
		t.Fatalf("effect list --json: %d %s", code, out)
	}
	if v := views[0]; !slices.Equal(v.Evidence, []string{doubt, shot}) || v.JobStatus != jobstore.StatusNeedsDecision ||
		v.Owner != a.Token.Owner || v.Generation != a.Token.Generation {
		t.Fatalf("view %+v", v)
	}
	if code, out, _ := cli("effect", "list", "--state", "done"); code != 0 || strings.Contains(out, "order-9") {
		t.Fatalf("effect list --state done: %d\n%s", code, out)
	}
	code, out, _ = cli("effect", "show", "order-9/submit")
	for _, want := range []string{"state    in_doubt", doubt, shot, "effect resolve order-9/submit --retry"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("effect show lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := cli("effect", "resolve", "order-9/submit"); code != exitUsage {
		t.Fatalf("resolve without a decision: exit %d", code)
	}
	if code, _, _ := cli("effect", "list", "--state", "bogus"); code != exitUsage {
		t.Fatalf("list with an unknown state: exit %d", code)
	}
	code, out, stderr = cli("effect", "resolve", "order-9/submit", "--retry", "--note", "not in the shop's orders")
	if code != 0 || out != "effect order-9/submit resolved retry; job j queued again\n" {
		t.Fatalf("resolve: %d %q %q", code, out, stderr)
	}
	if j, err := st.Get(ctx, "j"); err != nil || j.Status != jobstore.StatusQueued {
		t.Fatalf("job after resolve: %+v, %v", j, err)
	}
	if code, _, stderr := cli("effect", "resolve", "order-9/submit", "--done"); code != exitFailure || !strings.Contains(stderr, "not in doubt") {
		t.Fatalf("second resolve: exit %d %q", code, stderr)
	}
	if code, _, _ := cli("effect", "show", "nope"); code != exitFailure {
		t.Fatalf("show of an unknown key: exit %d", code)
	}
}

// TestServePublishesResults runs edgecoord serve with an outbox subject in
// its config: an accepted result is delivered to it with its key, and
// effect list shows the message done with the receiver's receipt.
func TestServePublishesResults(t *testing.T) {
	ns := testenv.NATS(t)
	db := filepath.Join(t.TempDir(), "jobs.db")
	recv := coordtest.StartReceiver(t, ns.ClientURL(), "results.cli")
	srv := serve(t, ns.ClientURL(), fmt.Sprintf("  driver: sqlite\n  path: %s\noutbox:\n  subject: results.cli\n  timeout: 1s", db))
	coordtest.Start(t, coordtest.Options{ID: "pc-a", URL: ns.ClientURL(), Devices: []protocol.Device{{Serial: "P1", State: "device"}}})
	srv.mustCLI(t, "job", "submit", "-f", writeFile(t, "j.yaml", "id: pub-job\nsteps: [{op: screenshot}]\n"))
	key := jobstore.OutboxKey("pub-job")
	testenv.Eventually(t, 10*time.Second, "the result to be published", func() bool { return slices.Equal(recv.Applied(), []string{key}) })
	testenv.Eventually(t, 10*time.Second, "the receipt to be stored", func() bool {
		out := srv.mustCLI(t, "effect", "list", "--kind", "outbox", "--state", "done")
		return strings.Contains(out, key)
	})
	out := srv.mustCLI(t, "effect", "show", key, "--json")
	var v effectView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.State != protocol.EffectDone || !strings.Contains(string(v.Receipt), `"seq": 1`) {
		t.Fatalf("effect show: %s (%v)", out, err)
	}
}

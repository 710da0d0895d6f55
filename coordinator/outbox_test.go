package coordinator_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgeagent/edgeagent/coordinator/coordtest"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
	"github.com/edgeagent/edgeagent/coordinator/outbox"
	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/protocol/natsrpc"
	"github.com/edgeagent/edgeagent/testkit/testenv"
)

const resultsSubject = "results.published"

// crashingSender stands for a coordinator that dies during a delivery: it
// says it has been entered and then blocks until its coordinator stops.
// With send set it delivers first (so the message arrives, but its receipt
// is never stored); without, it dies before sending.
type crashingSender struct {
	send    outbox.Sender // nil: die before sending
	entered chan string
}

func (c crashingSender) Send(ctx context.Context, m outbox.Message) (json.RawMessage, error) {
	if c.send != nil {
		if _, err := c.send.Send(ctx, m); err != nil {
			return nil, err
		}
	}
	select {
	case c.entered <- m.Key:
	default:
	}
	<-ctx.Done() // the per-delivery timeout is longer than the test waits
	return nil, ctx.Err()
}

func outboxOptions(sender outbox.Sender) outbox.Options {
	return outbox.Options{
		Sender: sender, Interval: 100 * time.Millisecond, Timeout: 500 * time.Millisecond,
		Lease: time.Second, Backoff: 50 * time.Millisecond,
	}
}

func natsSender(t *testing.T, url string) outbox.NATSSender {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("outbox sender"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return outbox.NATSSender{Conn: nc, Subject: resultsSubject}
}

// runJob submits a job that a test agent finishes, and waits for its result.
func runJob(t *testing.T, url string, store jobstore.Store, id string) {
	t.Helper()
	coordtest.Start(t, coordtest.Options{ID: "pc-" + id, URL: url, Devices: []protocol.Device{phone("P-" + id)}, Artifacts: 2})
	submit(t, store, id, protocol.DeviceSelector{Serial: "P-" + id})
	waitStatus(t, store, id, jobstore.StatusSucceeded, 10*time.Second)
}

// wantDeliveredOnce checks that the receiver applied the job's message
// exactly once, that every delivery carried the job's one key, and that the
// stored receipt is the receiver's.
func wantDeliveredOnce(t *testing.T, store jobstore.Store, recv *coordtest.Receiver, jobID string, minDeliveries int) jobstore.EffectRecord {
	t.Helper()
	key := jobstore.OutboxKey(jobID)
	var r jobstore.EffectRecord
	testenv.Eventually(t, 10*time.Second, "outbox "+key+" done", func() bool {
		var err error
		r, err = store.GetEffect(context.Background(), key)
		return err == nil && r.State == protocol.EffectDone
	})
	if got := recv.Applied(); !slices.Equal(got, []string{key}) {
		t.Fatalf("applied %q, want %q once", got, key)
	}
	ds := recv.Deliveries()
	for _, d := range ds {
		if d.Key != key || d.PayloadKey != key || d.JobID != jobID {
			t.Fatalf("delivery %+v: want key %q for job %s on every attempt", d, key, jobID)
		}
	}
	if len(ds) < minDeliveries {
		t.Fatalf("%d deliveries, want at least %d: %+v", len(ds), minDeliveries, ds)
	}
	if r.Attempts < len(ds) {
		t.Fatalf("%d attempts recorded for %d deliveries", r.Attempts, len(ds))
	}
	var rc struct {
		Key string `json:"key"`
		Seq int    `json:"seq"`
	}
	if err := json.Unmarshal(r.Receipt, &rc); err != nil || rc.Key != key || rc.Seq != 1 {
		t.Fatalf("stored receipt %s, want the receiver's first receipt for %s", r.Receipt, key)
	}
	var p struct {
		JobID    string   `json:"job_id"`
		Manifest []string `json:"manifest"`
	}
	if err := json.Unmarshal(r.Payload, &p); err != nil || p.JobID != jobID || len(p.Manifest) != 2 {
		t.Fatalf("payload %s: want job %s with 2 artifacts in the manifest", r.Payload, jobID)
	}
	return r
}

// TestOutboxCoordinatorCrash: the message that
// publishes an accepted result is written in the transaction that accepts
// it, so a coordinator that dies between the commit and the delivery loses
// nothing: after the restart another coordinator process delivers it,
// with the same key, and a receiver that drops duplicate keys applies it
// exactly once, also when the first coordinator's delivery had arrived.
func TestOutboxCoordinatorCrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		delivered bool // the crashed coordinator's delivery arrived
	}{
		{"BeforeDelivery", false},
		{"AfterDeliveryBeforeReceipt", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testenv.NATS(t)
			dsn := testenv.Postgres(t)
			recv := coordtest.StartReceiver(t, ns.ClientURL(), resultsSubject)
			store := openPostgres(t, dsn)

			crash := crashingSender{entered: make(chan string, 1)}
			if tc.delivered {
				crash.send = natsSender(t, ns.ClientURL())
			}
			opts := fastOptions(t, "c1")
			opts.Outbox = outboxOptions(crash)
			opts.Outbox.Timeout = time.Second // the delivery hangs until the crash
			opts.Outbox.Lease = 2 * time.Second
			c1 := startCoordinator(t, ns.ClientURL(), openPostgres(t, dsn), opts)
			runJob(t, ns.ClientURL(), store, "job-1")
			key := jobstore.OutboxKey("job-1")
			select {
			case k := <-crash.entered:
				if k != key {
					t.Fatalf("delivering %q, want %q", k, key)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the first coordinator never started the delivery")
			}
			c1.stop() // the crash: no receipt is stored

			r, err := store.GetEffect(context.Background(), key)
			if err != nil || r.State != protocol.EffectPending || r.Attempts < 1 {
				t.Fatalf("after the crash: %s after %d attempts, %v; want pending", r.State, r.Attempts, err)
			}
			before := len(recv.Deliveries())
			if (before > 0) != tc.delivered {
				t.Fatalf("%d deliveries before the restart", before)
			}

			// The restart: a new process on the same database takes the
			// message over once the dead one's claim has run out.
			opts = fastOptions(t, "c2")
			opts.Outbox = outboxOptions(natsSender(t, ns.ClientURL()))
			startCoordinator(t, ns.ClientURL(), openPostgres(t, dsn), opts)
			r = wantDeliveredOnce(t, store, recv, "job-1", before+1)
			if len(recv.Deliveries()) != before+1 {
				t.Fatalf("%d deliveries after the restart, want %d", len(recv.Deliveries())-before, 1)
			}
		})
	}
}

// TestOutboxReplyLost: a delivery whose reply is
// lost is retried with the same key, never a new one; the receiver drops
// the duplicate and answers the first receipt, which is what gets stored.
func TestOutboxReplyLost(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	dsn := testenv.Postgres(t)
	recv := coordtest.StartReceiver(t, ns.ClientURL(), resultsSubject)
	recv.DropReplies(2)
	store := openPostgres(t, dsn)
	opts := fastOptions(t, "c1")
	opts.Outbox = outboxOptions(natsSender(t, ns.ClientURL()))
	opts.Outbox.Timeout = 200 * time.Millisecond
	startCoordinator(t, ns.ClientURL(), openPostgres(t, dsn), opts)
	runJob(t, ns.ClientURL(), store, "job-2")
	r := wantDeliveredOnce(t, store, recv, "job-2", 3)
	ds := recv.Deliveries()
	if len(ds) != 3 || ds[0].Replied || ds[1].Replied || !ds[2].Replied || !ds[0].Applied || ds[1].Applied || ds[2].Applied {
		t.Fatalf("deliveries %+v: want the first applied with its reply lost, a duplicate with its reply lost, a duplicate answered", ds)
	}
	if r.Attempts != 3 || r.LastError != "" {
		t.Fatalf("attempts %d, last error %q", r.Attempts, r.LastError)
	}
}

// TestOutboxPublishesFailures: a job its agent reports failed is published
// through the outbox too (event failed, the reason, the generation's
// artifacts), under the key of its generation, exactly once; a release for
// reassignment publishes nothing.
func TestOutboxPublishesFailures(t *testing.T) {
	t.Parallel()
	ns := testenv.NATS(t)
	recv := coordtest.StartReceiver(t, ns.ClientURL(), resultsSubject)
	store := openSQLite(t)
	opts := fastOptions(t, "c1")
	opts.Outbox = outboxOptions(natsSender(t, ns.ClientURL()))
	startCoordinator(t, ns.ClientURL(), store, opts)
	coordtest.Start(t, coordtest.Options{ID: "pc-f", URL: ns.ClientURL(), Devices: []protocol.Device{phone("P-f")},
		Behavior: func(fencing.Token) coordtest.Behavior { return coordtest.Hold }})
	submit(t, store, "job-f", protocol.DeviceSelector{Serial: "P-f"})
	j := waitStatus(t, store, "job-f", jobstore.StatusInProgress, 10*time.Second)
	tok := fencing.Token{JobID: j.ID, Owner: j.WorkerID, Generation: j.Generation}

	// The agent reports the failure, as the real agent does after a step
	// failed.
	nc, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix(protocol.InboxPrefix("pc-f")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const reason = "step 1 (screenshot): phone unplugged"
	if err := natsrpc.Request(t.Context(), nc, protocol.CoordSubject("pc-f", protocol.VerbFail),
		protocol.Fail{Token: tok, Reason: reason}, &protocol.Ack{}); err != nil {
		t.Fatalf("fail: %v", err)
	}
	waitStatus(t, store, "job-f", jobstore.StatusFailed, 10*time.Second)

	key := jobstore.OutboxFailureKey("job-f", tok.Generation)
	var r jobstore.EffectRecord
	testenv.Eventually(t, 10*time.Second, "outbox "+key+" delivered", func() bool {
		r, err = store.GetEffect(context.Background(), key)
		return err == nil && r.State == protocol.EffectDone
	})
	if got := recv.Applied(); !slices.Equal(got, []string{key}) {
		t.Fatalf("applied %q, want %q once", got, key)
	}
	var p struct {
		Key, Event, Owner, Reason string
		Generation                int64
		Manifest                  []string
	}
	if err := json.Unmarshal(r.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", r.Payload, err)
	}
	if p.Key != key || p.Event != jobstore.OutboxEventFailed || p.Reason != reason || p.Generation != tok.Generation || p.Owner != tok.Owner {
		t.Fatalf("payload %s", r.Payload)
	}
}

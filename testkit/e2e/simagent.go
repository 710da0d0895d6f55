package e2e

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/edgeagent/edgeagent/agent"
	"github.com/edgeagent/edgeagent/capture"
	"github.com/edgeagent/edgeagent/protocol"
	"github.com/edgeagent/edgeagent/testkit/testenv"
	"github.com/edgeagent/edgeagent/uploader"
)

// SimAgentOptions are the options of an agent run in the test process.
type SimAgentOptions struct {
	// ID is the agent id.
	ID string
	// Phone is its one simulated phone: serial default sim-<ID>, size
	// default 180x320.
	Phone capture.SimOptions
	// Phones, when set, are its phones instead of Phone (phones over adb).
	Phones agent.Phones
	// RequestTimeout is its NATS request timeout; default 1s.
	RequestTimeout time.Duration
}

// SimAgent is the agent package (not the binary) run in the test process
// on the Env's NATS server, uploading to its MinIO bucket with the
// credentials: for tests of the coordinator binary that need an agent they
// control, with a simulated phone whose operations they read and a crash
// (Kill) at the moment they choose.
type SimAgent struct {
	ID    string
	Agent *agent.Agent
	// Phone is its simulated phone (nil with SimAgentOptions.Phones).
	Phone *capture.Simulated
	// Conn is its NATS connection.
	Conn *nats.Conn
	stop context.CancelFunc
	done chan struct{}
}

// StartSimAgent runs an agent in the test process until the test ends or
// Kill, once it is connected (Ready).
func (e *Env) StartSimAgent(opts SimAgentOptions) *SimAgent {
	t := e.t
	t.Helper()
	a := &SimAgent{ID: opts.ID, done: make(chan struct{})}
	phones := opts.Phones
	if phones == nil {
		p := opts.Phone
		if p.Serial == "" {
			p.Serial = "sim-" + opts.ID
		}
		if p.Width == 0 {
			p.Width, p.Height = 180, 320
		}
		a.Phone = capture.NewSimulated(p)
		inv := capture.NewInventory()
		if err := inv.Add(a.Phone); err != nil {
			t.Fatal(err)
		}
		phones = agent.InventoryPhones(inv, "", capture.OpLogOptions{})
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = time.Second
	}
	m := e.MinIO()
	s3, err := uploader.NewS3(uploader.S3Options{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: m.Bucket})
	if err != nil {
		t.Fatalf("new s3: %v", err)
	}
	a.Conn, err = nats.Connect(e.NATSURL(), nats.Name(opts.ID), nats.CustomInboxPrefix(protocol.InboxPrefix(opts.ID)),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	a.Agent, err = agent.New(agent.Options{
		AgentID: opts.ID, Conn: a.Conn, Phones: phones,
		Store: s3, SafetyMargin: 200 * time.Millisecond, RequestTimeout: opts.RequestTimeout,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	go func() {
		defer close(a.done)
		_ = a.Agent.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-a.done
		a.Conn.Close()
	})
	testenv.Eventually(t, 10*time.Second, "agent "+opts.ID+" connected", a.Agent.Ready)
	return a
}

// Kill ends the agent as a crash would: its connection goes first, so it
// sends nothing more (no failure report, no renewal), then its run.
func (a *SimAgent) Kill() {
	a.Conn.Close()
	a.stop()
	<-a.done
}

// Ops counts the operations of its simulated phone by op.
func (a *SimAgent) Ops() map[string]int {
	n := map[string]int{}
	for _, c := range a.Phone.History() {
		n[c.Op]++
	}
	return n
}

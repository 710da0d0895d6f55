package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ── NATS ────────────────────────────────────────────────────────────────

// natsPort picks a free loopback port below the kernel's ephemeral range,
// so that, while the server is down, no outgoing connection (nor a
// connection of a client to itself, which TCP allows) takes it.
func natsPort() (int, error) {
	var last error
	for range 100 {
		p := 10000 + int(randUint()%22000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("find a port for nats: %w", last)
}

func (r *run) startNATS(port int) error {
	if port <= 0 {
		p, err := natsPort()
		if err != nil {
			return err
		}
		port = p
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		var ns *server.Server
		ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
		if err != nil {
			return fmt.Errorf("start nats server: %w", err)
		}
		go ns.Start()
		if ns.ReadyForConnections(2 * time.Second) {
			r.natsMu.Lock()
			r.ns = ns
			r.natsPort = ns.Addr().(*net.TCPAddr).Port
			r.natsMu.Unlock()
			return nil
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		err = errors.New("start nats server: not ready")
		time.Sleep(20 * time.Millisecond) // the port may not be free yet
	}
	return err
}

func (r *run) natsAddr() string {
	r.natsMu.Lock()
	defer r.natsMu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.natsPort))
}

// restartNATS takes the NATS server down for down and starts a new one on
// the same port. Overlapping restarts keep it down until the last ends.
func (r *run) restartNATS(ctx context.Context, down time.Duration) string {
	r.natsMu.Lock()
	ns := r.ns
	r.ns = nil
	r.natsDown++
	r.natsMu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		r.rec.note("nats server down")
	}
	sleepCtx(ctx, down)
	r.natsMu.Lock()
	r.natsDown--
	last := r.natsDown == 0
	port := r.natsPort
	r.natsMu.Unlock()
	if !last {
		return fmt.Sprintf("down %s, overlapping another restart", ms(down))
	}
	if err := r.startNATS(port); err != nil {
		r.rec.note("nats server failed to restart: " + err.Error())
		return "restart failed: " + err.Error()
	}
	r.rec.note("nats server up")
	return fmt.Sprintf("down %s", ms(down))
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ── NATS ────────────────────────────────────────────────────────────────

// natsNode is one NATS server of the schedule: the single embedded server,
// or one node of a cluster joined by routes (Shape.NATSNodes > 1). A node
// keeps its ports across restarts, so clients and the other nodes find it
// where they left it.
type natsNode struct {
	idx         int
	port        int // client port
	clusterPort int // route port; 0 for the single server
	ns          *server.Server
	down        int // restarts of this node in progress
}

// natsPort picks a free loopback port below the kernel's ephemeral range,
// so that, while the server is down, no outgoing connection (nor a
// connection of a client to itself, which TCP allows) takes it.
func natsPort(taken map[int]bool) (int, error) {
	var last error
	for range 100 {
		p := 10000 + int(randUint()%22000)
		if taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		l.Close()
		taken[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("find a port for nats: %w", last)
}

// setupNATS picks the ports of every node, starts them and, for a cluster,
// waits until every node has a route to every other.
func (r *run) setupNATS() error {
	n := r.plan.Shape.NATSNodes
	taken := map[int]bool{}
	for i := range n {
		nd := &natsNode{idx: i}
		var err error
		if nd.port, err = natsPort(taken); err != nil {
			return err
		}
		if n > 1 {
			if nd.clusterPort, err = natsPort(taken); err != nil {
				return err
			}
		}
		r.nodes = append(r.nodes, nd)
	}
	for _, nd := range r.nodes {
		if err := r.startNode(nd); err != nil {
			return err
		}
	}
	if n > 1 {
		return r.waitRoutes(30 * time.Second)
	}
	return nil
}

// nodeOptions is the configuration of node nd, the same at every start: a
// cluster node has a route to each other node's route port. The nodes do
// not advertise each other to clients (cluster no_advertise), so an agent
// reaches NATS only through its links, and every client uses the server
// list it was given.
func (r *run) nodeOptions(nd *natsNode) *server.Options {
	o := &server.Options{
		ServerName: fmt.Sprintf("nats-%d", nd.idx),
		Host:       "127.0.0.1", Port: nd.port, NoLog: true, NoSigs: true,
	}
	if nd.clusterPort > 0 {
		o.Cluster = server.ClusterOpts{Name: "chaos", Host: "127.0.0.1", Port: nd.clusterPort, NoAdvertise: true, PoolSize: -1}
		for _, other := range r.nodes {
			if other != nd {
				o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(other.clusterPort))})
			}
		}
	}
	return o
}

// startNode starts node nd on its ports.
func (r *run) startNode(nd *natsNode) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		var ns *server.Server
		ns, err = server.NewServer(r.nodeOptions(nd))
		if err != nil {
			return fmt.Errorf("start nats server %d: %w", nd.idx, err)
		}
		go ns.Start()
		if ns.ReadyForConnections(2 * time.Second) {
			r.natsMu.Lock()
			nd.ns = ns
			r.natsMu.Unlock()
			return nil
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		err = fmt.Errorf("start nats server %d: not ready", nd.idx)
		time.Sleep(20 * time.Millisecond) // the port may not be free yet
	}
	return err
}

// waitRoutes waits until every running node has a route to every other
// node.
func (r *run) waitRoutes(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		formed, missing := true, ""
		r.natsMu.Lock()
		for _, nd := range r.nodes {
			if nd.ns == nil {
				continue
			}
			if got := nd.ns.NumRemotes(); got < len(r.nodes)-1 {
				formed = false
				missing = fmt.Sprintf("node %d has %d of %d routes", nd.idx, got, len(r.nodes)-1)
			}
		}
		r.natsMu.Unlock()
		if formed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for the nats cluster to form: %s after %s", missing, limit)
		}
		if !sleepCtx(r.ctx, 10*time.Millisecond) {
			return errors.New("wait for the nats cluster to form: interrupted")
		}
	}
}

// natsAddrs returns every node's client address, starting with node
// first's and going round: a client's home node first, then the others it
// reconnects to.
func (r *run) natsAddrs(first int) []string {
	out := make([]string, 0, len(r.nodes))
	for i := range r.nodes {
		nd := r.nodes[(first+i)%len(r.nodes)]
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)))
	}
	return out
}

// natsURLs is natsAddrs as a server list for nats.Connect.
func (r *run) natsURLs(first int) string {
	addrs := r.natsAddrs(first)
	for i, a := range addrs {
		addrs[i] = "nats://" + a
	}
	return strings.Join(addrs, ",")
}

// Home nodes: the coordinators connect first to nodes 0, 1, …; the agents
// to the last node, the one before, …, so that with three nodes the
// requests of an agent on node 2 reach the coordinators on nodes 0 and 1
// over routes.
func (r *run) coordHome(i int) int { return i % len(r.nodes) }

func (r *run) agentHome(i int) int {
	n := len(r.nodes)
	return ((n-1-i)%n + n) % n
}

// restartNodes takes nodes down for down and starts them again on the same
// ports with the same configuration. A node in several overlapping
// restarts stays down until the last of them ends.
func (r *run) restartNodes(ctx context.Context, nodes []*natsNode, down time.Duration) string {
	var stopped []*server.Server
	r.natsMu.Lock()
	for _, nd := range nodes {
		nd.down++
		if nd.ns != nil {
			stopped = append(stopped, nd.ns)
			nd.ns = nil
		}
	}
	r.natsMu.Unlock()
	for _, ns := range stopped {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
	r.rec.note(fmt.Sprintf("nats %s down", nodeNames(nodes)))
	sleepCtx(ctx, down)
	var start []*natsNode
	r.natsMu.Lock()
	for _, nd := range nodes {
		nd.down--
		if nd.down == 0 && nd.ns == nil {
			start = append(start, nd)
		}
	}
	r.natsMu.Unlock()
	if len(start) == 0 {
		return fmt.Sprintf("down %s, overlapping another restart", ms(down))
	}
	var failed []string
	for _, nd := range start {
		if err := r.startNode(nd); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		r.rec.note("nats failed to restart: " + strings.Join(failed, "; "))
		return "restart failed: " + strings.Join(failed, "; ")
	}
	r.rec.note(fmt.Sprintf("nats %s up", nodeNames(start)))
	detail := fmt.Sprintf("down %s", ms(down))
	if len(start) < len(nodes) {
		detail += ", some nodes kept down by an overlapping restart"
	}
	return detail
}

func nodeNames(nodes []*natsNode) string {
	if len(nodes) == 1 {
		return fmt.Sprintf("node %d", nodes[0].idx)
	}
	var s []string
	for _, nd := range nodes {
		s = append(s, strconv.Itoa(nd.idx))
	}
	return "nodes " + strings.Join(s, ",")
}

// shutdownNATS stops every node at the end of the schedule.
func (r *run) shutdownNATS() {
	var stopped []*server.Server
	r.natsMu.Lock()
	for _, nd := range r.nodes {
		if nd.ns != nil {
			stopped = append(stopped, nd.ns)
			nd.ns = nil
		}
	}
	r.natsMu.Unlock()
	for _, ns := range stopped {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

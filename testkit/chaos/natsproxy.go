package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/edgeagent/fencing"
	"github.com/edgeagent/edgeagent/protocol"
)

// Dir is the direction of a NATS frame through a NATSLink.
type Dir uint8

// Directions.
const (
	ToServer Dir = iota // agent → NATS server
	ToClient            // NATS server → agent
)

func (d Dir) String() string {
	if d == ToServer {
		return "→"
	}
	return "←"
}

// frame is one operation of the NATS client protocol as read off the wire:
// a control line and, for PUB, HPUB, MSG and HMSG, its payload.
type frame struct {
	op      string // upper case: PUB, HPUB, MSG, HMSG, CONNECT, SUB, PING, INFO, …
	subject string
	reply   string
	hdr     []byte // header block of HPUB and HMSG
	payload []byte
	raw     []byte // the whole frame as it came
}

// message reports whether the frame carries a message (PUB, HPUB, MSG,
// HMSG), the only frames faults act on.
func (f *frame) message() bool {
	switch f.op {
	case "PUB", "HPUB", "MSG", "HMSG":
		return true
	}
	return false
}

// maxControlLine bounds a control line (the NATS server's default is 4 KiB;
// INFO lines of a busy server are longer).
const maxControlLine = 64 << 10

// readFrame reads one protocol operation.
func readFrame(r *bufio.Reader) (*frame, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("read nats frame: control line longer than %d bytes", r.Size())
	}
	if err != nil {
		return nil, err
	}
	f := &frame{raw: append([]byte(nil), line...)}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return f, nil // a bare CRLF: pass it on
	}
	f.op = strings.ToUpper(fields[0])
	var hsize, tsize int
	switch f.op {
	case "PUB": // PUB <subject> [reply] <size>
		if len(fields) != 3 && len(fields) != 4 {
			return nil, fmt.Errorf("read nats frame: malformed %q", strings.TrimSpace(string(line)))
		}
		f.subject = fields[1]
		if len(fields) == 4 {
			f.reply = fields[2]
		}
		tsize, err = strconv.Atoi(fields[len(fields)-1])
	case "HPUB": // HPUB <subject> [reply] <hsize> <tsize>
		if len(fields) != 4 && len(fields) != 5 {
			return nil, fmt.Errorf("read nats frame: malformed %q", strings.TrimSpace(string(line)))
		}
		f.subject = fields[1]
		if len(fields) == 5 {
			f.reply = fields[2]
		}
		hsize, err = strconv.Atoi(fields[len(fields)-2])
		if err == nil {
			tsize, err = strconv.Atoi(fields[len(fields)-1])
		}
	case "MSG": // MSG <subject> <sid> [reply] <size>
		if len(fields) != 4 && len(fields) != 5 {
			return nil, fmt.Errorf("read nats frame: malformed %q", strings.TrimSpace(string(line)))
		}
		f.subject = fields[1]
		if len(fields) == 5 {
			f.reply = fields[3]
		}
		tsize, err = strconv.Atoi(fields[len(fields)-1])
	case "HMSG": // HMSG <subject> <sid> [reply] <hsize> <tsize>
		if len(fields) != 5 && len(fields) != 6 {
			return nil, fmt.Errorf("read nats frame: malformed %q", strings.TrimSpace(string(line)))
		}
		f.subject = fields[1]
		if len(fields) == 6 {
			f.reply = fields[3]
		}
		hsize, err = strconv.Atoi(fields[len(fields)-2])
		if err == nil {
			tsize, err = strconv.Atoi(fields[len(fields)-1])
		}
	default:
		return f, nil
	}
	if err != nil || hsize < 0 || tsize < hsize {
		return nil, fmt.Errorf("read nats frame: bad sizes in %q", strings.TrimSpace(string(line)))
	}
	body := make([]byte, tsize+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("read nats frame payload: %w", err)
	}
	f.raw = append(f.raw, body...)
	f.hdr = body[:hsize]
	f.payload = body[hsize:tsize]
	return f, nil
}

// errorCode returns the Nats-Service-Error-Code header of a frame, 0 when
// absent.
func (f *frame) errorCode() int {
	if len(f.hdr) == 0 {
		return 0
	}
	for _, line := range bytes.Split(f.hdr, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(bytes.TrimSpace(k)), "Nats-Service-Error-Code") {
			c, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			return c
		}
	}
	return 0
}

// Verdict is what a link hook decides about one message.
type Verdict struct {
	// Drop discards the message: it is never forwarded.
	Drop bool
	// After runs once the message was forwarded (or dropped).
	After func()
}

// MsgFaults are the message faults of one agent's links while a fault
// window is open: every message is delayed by Delay (order kept); with
// probability DupProb a copy follows up to DupLate later; with probability
// ReorderProb a message is held for up to ReorderLate while later ones
// pass it.
type MsgFaults struct {
	Delay       time.Duration
	DupProb     float64
	DupLate     time.Duration
	ReorderProb float64
	ReorderLate time.Duration
}

func (m MsgFaults) zero() bool {
	return m.Delay == 0 && m.DupProb == 0 && m.ReorderProb == 0
}

// LinkControl is what the harness gives a link: the fault state of the agent
// it carries, shared by its NATS and storage links and by every process of
// that agent.
type LinkControl interface {
	// Gate returns nil when traffic may flow, or a channel closed when the
	// pause ends.
	Gate() <-chan struct{}
	// Msg returns the message faults in force.
	Msg() MsgFaults
	// Hook sees every message before it is queued.
	Hook(l *NATSLink, dir Dir, rec *FrameRecord) Verdict
	// Rand returns a number in [0, 1) for fault decisions.
	Rand() float64
}

// NATSLink is a TCP proxy between one agent process and the NATS server
// that understands the NATS client protocol well enough to act on whole
// messages: it can hold all traffic (a paused process), delay, duplicate
// and reorder messages, and cut everything at once (the process killed).
// It records every message with the time it was read, which is when the
// agent sent it (towards the server) or when the server delivered it
// (towards the agent).
type NATSLink struct {
	name string
	// lns[i] forwards to upstreams[i]: one listener per NATS server, so
	// that a client given every listener's URL reconnects to another
	// server through the same link when one goes down.
	upstreams []string
	lns       []net.Listener
	ctl       LinkControl
	rec       *Recorder

	mu      sync.Mutex
	dead    bool
	pipes   map[*pipe]struct{}
	pending int
	wg      sync.WaitGroup
}

// NewNATSLink listens on a loopback port for the agent process name and
// forwards to the NATS server at upstream (host:port).
func NewNATSLink(name, upstream string, ctl LinkControl, rec *Recorder) (*NATSLink, error) {
	return NewNATSLinkTo(name, []string{upstream}, ctl, rec)
}

// NewNATSLinkTo is NewNATSLink for the servers of a NATS cluster: one
// loopback port per server in upstreams, each forwarding to its server.
// Faults and the record are the link's, whichever server a message takes.
func NewNATSLinkTo(name string, upstreams []string, ctl LinkControl, rec *Recorder) (*NATSLink, error) {
	if len(upstreams) == 0 {
		return nil, fmt.Errorf("nats link %s: no server to forward to", name)
	}
	l := &NATSLink{name: name, upstreams: upstreams, ctl: ctl, rec: rec, pipes: map[*pipe]struct{}{}}
	for range upstreams {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, o := range l.lns {
				o.Close()
			}
			return nil, fmt.Errorf("listen for nats link %s: %w", name, err)
		}
		l.lns = append(l.lns, ln)
	}
	for i := range l.lns {
		l.wg.Go(func() { l.accept(i) })
	}
	return l, nil
}

// URL is what the agent connects to: the link to the first server.
func (l *NATSLink) URL() string { return "nats://" + l.lns[0].Addr().String() }

// URLs is the server list the agent connects with: the link to every
// server, in the order of the upstreams.
func (l *NATSLink) URLs() string {
	urls := make([]string, len(l.lns))
	for i, ln := range l.lns {
		urls[i] = "nats://" + ln.Addr().String()
	}
	return strings.Join(urls, ",")
}

// Name is the agent process the link carries.
func (l *NATSLink) Name() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.name
}

// setName names the link after the agent process, once its boot id is
// known and before it sends anything.
func (l *NATSLink) setName(name string) {
	l.mu.Lock()
	l.name = name
	l.mu.Unlock()
}

func (l *NATSLink) accept(i int) {
	for {
		c, err := l.lns[i].Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		dead := l.dead
		l.mu.Unlock()
		if dead {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", l.upstreams[i], 500*time.Millisecond)
		if err != nil {
			c.Close() // the server is down: the agent retries
			continue
		}
		p := &pipe{l: l, client: c, server: up, closed: make(chan struct{})}
		l.mu.Lock()
		if l.dead {
			l.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		l.pipes[p] = struct{}{}
		l.mu.Unlock()
		p.start()
	}
}

// Kill cuts the link for good: the listener and every connection are
// closed, and nothing queued is forwarded any more. It returns at once.
func (l *NATSLink) Kill() {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		return
	}
	l.dead = true
	pipes := make([]*pipe, 0, len(l.pipes))
	for p := range l.pipes {
		pipes = append(pipes, p)
	}
	l.mu.Unlock()
	for _, ln := range l.lns {
		ln.Close()
	}
	for _, p := range pipes {
		p.close()
	}
}

// Dead reports whether Kill was called.
func (l *NATSLink) Dead() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

// Close kills the link and waits for its goroutines.
func (l *NATSLink) Close() {
	l.Kill()
	l.wg.Wait()
}

// Pending is the number of messages read but not yet forwarded or dropped.
func (l *NATSLink) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

func (l *NATSLink) addPending(n int) {
	l.mu.Lock()
	l.pending += n
	l.mu.Unlock()
}

// pipe is one client connection and its server connection.
type pipe struct {
	l      *NATSLink
	client net.Conn
	server net.Conn
	once   sync.Once
	closed chan struct{}
}

func (p *pipe) close() {
	p.once.Do(func() {
		close(p.closed)
		p.client.Close()
		p.server.Close()
		p.l.mu.Lock()
		delete(p.l.pipes, p)
		p.l.mu.Unlock()
	})
}

func (p *pipe) start() {
	up := newSender(p, p.server)
	down := newSender(p, p.client)
	p.l.wg.Go(func() { p.pump(ToServer, p.client, up) })
	p.l.wg.Go(func() { p.pump(ToClient, p.server, down) })
	p.l.wg.Go(up.run)
	p.l.wg.Go(down.run)
}

// pump reads frames from src and queues them on s, applying the faults.
func (p *pipe) pump(dir Dir, src net.Conn, s *sender) {
	defer s.stop()
	defer p.close()
	// One goroutine only reads and timestamps, taking no lock, so that the
	// time a message is seen is when its bytes were read even when the
	// processing of an earlier one waits.
	type read struct {
		f  *frame
		at time.Time
	}
	frames := make(chan read, 1024)
	go func() {
		defer close(frames)
		r := bufio.NewReaderSize(src, maxControlLine)
		for {
			f, err := readFrame(r)
			if err != nil {
				return
			}
			select {
			case frames <- read{f, time.Now()}:
			case <-p.closed:
				return
			}
		}
	}()
	defer func() {
		p.close() // the reader's connection: it ends
		for range frames {
		}
	}()
	for rd := range frames {
		f, now := rd.f, rd.at
		it := &item{f: f, release: now}
		if f.message() {
			it.rec = p.l.rec.frame(p.l.Name(), dir, f, now)
			v := p.l.ctl.Hook(p.l, dir, it.rec)
			it.after = v.After
			if v.Drop {
				p.l.rec.frameDone(it.rec, time.Time{}, "dropped")
				if it.after != nil {
					it.after()
				}
				continue
			}
			mf := p.l.ctl.Msg()
			if !mf.zero() {
				it.release = now.Add(mf.Delay)
				if mf.DupProb > 0 && p.l.ctl.Rand() < mf.DupProb {
					late := time.Duration(p.l.ctl.Rand() * float64(mf.DupLate))
					dup := &item{f: f, release: now.Add(mf.Delay + late), rec: p.l.rec.duplicate(it.rec)}
					s.side(dup)
				}
				if mf.ReorderProb > 0 && p.l.ctl.Rand() < mf.ReorderProb {
					it.release = now.Add(mf.Delay + time.Duration(p.l.ctl.Rand()*float64(mf.ReorderLate)))
					it.note = "reordered"
					s.side(it)
					continue
				}
			}
		}
		if !s.push(it) {
			return
		}
	}
}

type item struct {
	f       *frame
	release time.Time
	rec     *FrameRecord // nil for frames that are not messages
	note    string
	after   func()
}

// sender writes items to one connection in order, each not before its
// release time and not while the agent is paused. Side items (reordered
// messages, duplicates) are written by their own timers between the others.
type sender struct {
	p   *pipe
	dst net.Conn
	wmu sync.Mutex

	mu   sync.Mutex
	q    []*item
	wake chan struct{}
	done bool
}

func newSender(p *pipe, dst net.Conn) *sender {
	return &sender{p: p, dst: dst, wake: make(chan struct{}, 1)}
}

func (s *sender) push(it *item) bool {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		s.drop(it)
		return false
	}
	s.q = append(s.q, it)
	s.mu.Unlock()
	if it.rec != nil {
		s.p.l.addPending(1)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

func (s *sender) stop() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) run() {
	for {
		select {
		case <-s.p.closed:
			// The connection is gone: everything still queued is lost.
			s.abandon()
			return
		default:
		}
		s.mu.Lock()
		if len(s.q) == 0 {
			if s.done {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-s.p.closed:
			}
			continue
		}
		it := s.q[0]
		s.q = s.q[1:]
		s.mu.Unlock()
		ok := s.deliver(it)
		if it.rec != nil {
			s.p.l.addPending(-1)
		}
		if !ok {
			s.abandon()
			return
		}
	}
}

// abandon drops everything queued; the connection is gone.
func (s *sender) abandon() {
	s.mu.Lock()
	rest := s.q
	s.q = nil
	s.done = true
	s.mu.Unlock()
	for _, r := range rest {
		if r.rec != nil {
			s.p.l.addPending(-1)
		}
		s.drop(r)
	}
}

// side writes it from its own timer, past the queue.
func (s *sender) side(it *item) {
	s.p.l.addPending(1)
	s.p.l.wg.Go(func() {
		defer s.p.l.addPending(-1)
		s.deliver(it)
	})
}

// deliver waits for the release time and the gate, then writes. It reports
// false when the connection is gone (the item is then dropped).
func (s *sender) deliver(it *item) bool {
	if d := time.Until(it.release); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.p.closed:
			t.Stop()
			s.drop(it)
			return false
		}
	}
	for {
		g := s.p.l.ctl.Gate()
		if g == nil {
			break
		}
		select {
		case <-g:
		case <-s.p.closed:
			s.drop(it)
			return false
		}
	}
	select {
	case <-s.p.closed:
		s.drop(it)
		return false
	default:
	}
	s.wmu.Lock()
	_, err := s.dst.Write(it.f.raw)
	s.wmu.Unlock()
	if err != nil {
		s.drop(it)
		return false
	}
	if it.rec != nil {
		s.p.l.rec.frameDone(it.rec, time.Now(), it.note)
	}
	if it.after != nil {
		it.after()
	}
	return true
}

func (s *sender) drop(it *item) {
	if it.rec != nil {
		s.p.l.rec.frameDone(it.rec, time.Time{}, "lost")
	}
	if it.after != nil {
		it.after()
	}
}

// messageInfo extracts what the history keeps of a message: the verb of
// an agent or coordinator subject, the token it carries, and for replies
// the error code and whether a result was accepted.
func messageInfo(f *frame) (verb string, tok fencing.Token, code int, accepted bool) {
	p := strings.Split(f.subject, ".")
	switch {
	case len(p) == 5 && p[0] == "edge" && p[1] == protocol.Version && (p[2] == "coord" || p[2] == "agent"):
		verb = p[4]
		var body struct {
			Token fencing.Token `json:"token"`
		}
		if json.Unmarshal(f.payload, &body) == nil {
			tok = body.Token
		}
	case strings.HasPrefix(f.subject, "_INBOX."):
		verb = "reply"
		code = f.errorCode()
		if code == 0 {
			var rr struct {
				Accepted bool `json:"accepted"`
			}
			if json.Unmarshal(f.payload, &rr) == nil {
				accepted = rr.Accepted
			}
		}
	}
	return verb, tok, code, accepted
}

// pauseGate is a pause switch: while paused, Gate returns a channel closed
// at the end of the pause. Overlapping pauses end with the last one.
type pauseGate struct {
	mu     sync.Mutex
	depth  int
	resume chan struct{} // nil when not paused
}

func (g *pauseGate) Gate() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resume == nil {
		return nil
	}
	return g.resume
}

func (g *pauseGate) pause() {
	g.mu.Lock()
	g.depth++
	if g.resume == nil {
		g.resume = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *pauseGate) unpause() {
	g.mu.Lock()
	g.depth--
	if g.depth <= 0 && g.resume != nil {
		g.depth = 0
		close(g.resume)
		g.resume = nil
	}
	g.mu.Unlock()
}

// lockedRand is a seeded source safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))}
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

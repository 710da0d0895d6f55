package bench

import (
	"net"
	"sync"
)

// proxy forwards TCP connections to a target and can cut them off: in a
// partition it keeps the connections open but drops every byte in both
// directions, as a network that lost its route does; heal closes them, so
// that the clients reconnect.
type proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	conns     []net.Conn
	partition bool
	wg        sync.WaitGroup
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *proxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		t, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, t)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(t, c) })
		p.wg.Go(func() { p.pipe(c, t) })
	}
}

// pipe copies from src to dst, dropping what arrives during a partition.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.partition
			p.mu.Unlock()
			if !cut {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Partition starts dropping every byte.
func (p *proxy) Partition() {
	p.mu.Lock()
	p.partition = true
	p.mu.Unlock()
}

// Heal closes the connections that lived through the partition and lets
// new ones through.
func (p *proxy) Heal() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.partition = false
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *proxy) Close() {
	p.ln.Close()
	p.Heal()
	p.wg.Wait()
}

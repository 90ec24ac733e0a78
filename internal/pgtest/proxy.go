package pgtest

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server and can cut them the way a
// network partition does: Partition makes every open connection a black
// hole, its bytes read and dropped in both directions while both sockets
// stay open, so neither end learns anything from the kernel. Connections
// made afterwards are forwarded as usual, unless Isolate says otherwise.
type Proxy struct {
	ln       net.Listener
	target   string
	isolated atomic.Bool

	mu    sync.Mutex
	open  []*link // forwarding
	links []*link // all, closed when the test ends
}

type link struct {
	client, server net.Conn
	cut            atomic.Bool
}

// NewProxy listens on a free port of 127.0.0.1 and forwards to target
// (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Via returns dsn, a libpq URL, with its host and port replaced by the
// proxy's.
func (p *Proxy) Via(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// Partition black-holes every connection open now and reports how many
// there were.
func (p *Proxy) Partition() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.open {
		l.cut.Store(true)
	}
	n := len(p.open)
	p.open = nil
	return n
}

// Isolate makes the connections made from now on black holes from their
// start (on), or forwarded again (off), as a partition that lasts.
func (p *Proxy) Isolate(on bool) { p.isolated.Store(on) }

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		l := &link{client: client, server: server}
		l.cut.Store(p.isolated.Load())
		p.mu.Lock()
		if !l.cut.Load() {
			p.open = append(p.open, l)
		}
		p.links = append(p.links, l)
		p.mu.Unlock()
		go l.pipe(server, client)
		go l.pipe(client, server)
	}
}

// pipe copies from src to dst, dropping what it reads once the link is
// cut. Until then an end that closes closes the other; after, neither
// learns of the other's close.
func (l *link) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.cut.Load() {
			_, err = dst.Write(buf[:n])
		}
		if err != nil {
			if !l.cut.Load() {
				l.close()
			}
			return
		}
	}
}

func (l *link) close() {
	l.client.Close()
	l.server.Close()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.close()
	}
}

//go:build cgo

package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// startProxy runs a proxy in front of the test cluster until the test
// ends, asking the sidecar at side if it is not empty, and returns it
// with dsn rewritten to go through it.
func startProxy(t testing.TB, dsn, side string) (*Proxy, string) {
	t.Helper()
	return startProxyWith(t, dsn, side, Config{})
}

// startProxyWith is startProxy with cfg's settings; its Upstream, if
// set, and dsn name the same server.
func startProxyWith(t testing.TB, dsn, side string, cfg Config) (*Proxy, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Upstream == "" {
		cfg.Upstream = fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(t).Port)
	}
	cfg.Logger = discard
	if side != "" {
		pcfg, err := pgxpool.ParseConfig(side)
		if err != nil {
			t.Fatal(err)
		}
		pcfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
			heapfetch.RegisterTypes(c.TypeMap())
			return nil
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		client, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{pool}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sidecar = Remote(client, pool)
	}
	if cfg.StatusInterval == 0 {
		cfg.StatusInterval = 100 * time.Millisecond
	}
	if cfg.CandidateWait == 0 {
		// Tests count the statements answered: a loaded machine must
		// not turn them into statements passed through for the time.
		cfg.CandidateWait = 5 * time.Second
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	return p, u.String()
}

// slots numbers the sidecars' publications and slots: slots are the
// cluster's, and a stopped sidecar's is dropped a moment after its test.
var slots atomic.Int32

// startSidecar runs a sidecar over dsn's database with the index
// definitions defs, until the test ends, and returns its URL.
func startSidecar(t testing.TB, dsn string, defs ...string) (*sidecar.Sidecar, string) {
	t.Helper()
	return startNamedSidecar(t, dsn, fmt.Sprintf("proxy_test_%d", slots.Add(1)), "127.0.0.1:0", defs...)
}

// startNamedSidecar is startSidecar with a slot name and an address.
func startNamedSidecar(t testing.TB, dsn, name, listen string, defs ...string) (*sidecar.Sidecar, string) {
	t.Helper()
	sc, err := sidecar.Start(context.Background(), sidecar.Config{Source: dsn, Name: name, Indexes: defs,
		Listen: listen, Auth: "trust", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Stop() })
	return sc, "postgres://vecside@" + sc.Addr.String() + "/vecside?sslmode=disable"
}

func mustExec(t testing.TB, db *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	return pgtest.Connect(t, dsn)
}

// waitIndexed waits until p's catalog has table's embedding column
// indexed for each metric.
func waitIndexed(t testing.TB, p *Proxy, table string, metrics ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range metrics {
		for {
			if _, ok := p.cat.lookup("", table, "embedding", m, nil); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the proxy does not see an index of %s for %s", table, m)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// eachWay runs test with the fixture's proxy asking its sidecar over
// pgwire (vecside proxy), then in process (vecside serve --proxy): ask
// is what a test calls on its fixture to choose.
func eachWay(t *testing.T, test func(t *testing.T, ask func(*fixture, *testing.T))) {
	t.Run("pgwire", func(t *testing.T) { test(t, func(*fixture, *testing.T) {}) })
	t.Run("in-process", func(t *testing.T) { test(t, func(f *fixture, t *testing.T) { f.askInProcess(t) }) })
}

// upstreamCounter relays connections to the test cluster and counts the
// messages the proxy sends it, by type ("DS": Describe of a statement).
type upstreamCounter struct {
	addr   string
	mu     sync.Mutex
	counts map[string]int
}

func countUpstream(t testing.TB) *upstreamCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pg := fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(t).Port)
	c := &upstreamCounter{addr: ln.Addr().String(), counts: map[string]int{}}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", pg)
			if err != nil {
				conn.Close()
				continue
			}
			go func() { io.Copy(conn, up); conn.Close() }()
			go func() { c.relay(up, conn); up.Close() }()
		}
	}()
	return c
}

// relay copies src to dst message by message, counting them: first the
// startup packet (a length, no type), then typed messages.
func (c *upstreamCounter) relay(dst io.Writer, src io.Reader) {
	r := bufio.NewReader(src)
	var hdr [5]byte
	for first := true; ; first = false {
		h := hdr[:]
		if first {
			h = hdr[1:]
		}
		if _, err := io.ReadFull(r, h); err != nil {
			return
		}
		msg := make([]byte, len(h)+int(binary.BigEndian.Uint32(h[len(h)-4:]))-4)
		copy(msg, h)
		if _, err := io.ReadFull(r, msg[len(h):]); err != nil {
			return
		}
		if !first {
			key := string(msg[:1])
			if msg[0] == 'D' && len(msg) > 5 {
				key += string(msg[5])
			}
			c.mu.Lock()
			c.counts[key]++
			c.mu.Unlock()
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
	}
}

func (c *upstreamCounter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

// hijack connects to url and takes the connection over, to speak the
// protocol message by message; it is closed when the test ends.
func hijack(t testing.TB, url string) *pgconn.HijackedConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Conn.Close() })
	return h
}

//go:build cgo

package proxy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/vecside/vecside/internal/pgtest"
)

// TestBlockingReads: an authenticated session reads both its sockets
// with blocking calls, and its threads end with it, whether the client
// leaves or the proxy stops under an idle session.
func TestBlockingReads(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	p, err := New(Config{Upstream: fmt.Sprintf("127.0.0.1:%d", pgtest.Shared(t).Port), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln) }()
	u, _ := url.Parse(dsn)
	u.Host = ln.Addr().String()
	before := blockingSessions.Load()

	readers := func() (n int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, s := range p.sessions {
			n += len(s.blocking)
		}
		return n
	}
	waitFor := func(what string, want int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); blockingSessions.Load() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d sessions read with blocking calls, want %d", what, blockingSessions.Load(), want)
			}
		}
	}

	c := connect(t, u.String())
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d, %v", one, err)
	}
	if got := readers(); got != 2 || blockingSessions.Load() != before+1 {
		t.Fatalf("%d blocking readers in %d sessions, want both sockets of one", got, blockingSessions.Load()-before)
	}
	c.Close(ctx)
	waitFor("after the client left", before)

	// An idle session when the proxy stops: its reads, blocked in the
	// kernel, must end so that Serve can return.
	idle := connect(t, u.String())
	defer idle.Close(context.Background())
	if _, err := idle.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	waitFor("an idle session", before+1)
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return 10 s after its context ended, with a session reading in the kernel")
	}
	waitFor("after the proxy stopped", before)
}

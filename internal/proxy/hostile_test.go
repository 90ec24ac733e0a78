//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/internal/pgtest"
)

var lockoutTime = flag.Duration("lockout-time", 5*time.Second, "TestNeverAuthenticating: how long the clients that never authenticate try")

// TestNeverAuthenticating: 120 connections of one address that send a
// StartupMessage and never answer the password request, reconnecting
// whenever closed, keep no other address's client from logging in.
func TestNeverAuthenticating(t *testing.T) {
	cl := pgtest.Shared(t)
	dsn := cl.NewDatabase(t)
	scramRole(t, cl, connect(t, dsn))
	p, via := startProxyWith(t, dsn, "", Config{Limits: Limits{AuthTimeout: 2 * time.Second}})
	good := strings.Replace(via, "postgres@", "scram_user:sekrit@", 1)
	cfg, err := pgconn.ParseConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	startup, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": "scram_user", "database": cfg.Database}}).Encode(nil)

	ctx, stop := context.WithTimeout(context.Background(), *lockoutTime)
	defer stop()
	var wg sync.WaitGroup
	var attempts atomic.Int64
	hostile := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range 120 {
		wg.Go(func() {
			for ctx.Err() == nil {
				nc, err := hostile.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				attempts.Add(1)
				stopped := context.AfterFunc(ctx, func() { nc.Close() })
				nc.Write(startup)
				io.Copy(io.Discard, nc) // until the proxy closes it
				stopped()
				nc.Close()
			}
		})
	}
	ok, failed := 0, 0
	var last error
	for ctx.Err() == nil {
		c, err := pgx.Connect(context.Background(), good)
		if err != nil {
			failed++
			last = err
		} else {
			ok++
			c.Close(context.Background())
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d logins, %d failed; %d connections that never authenticated; %d evicted, %d refused at their turn's timeout",
		ok, failed, attempts.Load(), p.Stats().Evicted, p.Stats().TurnTimeouts)
	if ok == 0 || float64(ok) < 0.95*float64(ok+failed) {
		t.Errorf("%d of %d logins succeeded beside clients that never authenticate, the last failure: %v", ok, ok+failed, last)
	}
}

// TestEncryptionAskedTwice: a second SSLRequest is refused as PostgreSQL
// refuses it, not answered again and again.
func TestEncryptionAskedTwice(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	_, via := startProxy(t, dsn, "")
	ask := func(url string) (string, []byte) {
		t.Helper()
		cfg, err := pgconn.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := net.Dial("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		req := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, sslRequestCode)
		nc.Write(req)
		first := make([]byte, 1)
		if _, err := io.ReadFull(nc, first); err != nil {
			t.Fatal(err)
		}
		nc.Write(req)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, err := io.ReadAll(nc)
		if err != nil {
			t.Fatalf("after a second SSLRequest: %v, want the connection closed", err)
		}
		return string(first), rest
	}
	wantFirst, want := ask(dsn)
	first, got := ask(via)
	if first != wantFirst || !bytes.Contains(got, []byte("0A000")) || !bytes.Contains(want, []byte("0A000")) {
		t.Errorf("through the proxy %q then %q; PostgreSQL %q then %q", first, got, wantFirst, want)
	}
}

// TestTerminateEndsHeldBatch: a Terminate after the Parse, Bind and
// Execute of a statement the proxy may answer, with no Sync, ends the
// session at once, as it does straight to PostgreSQL.
func TestTerminateEndsHeldBatch(t *testing.T) {
	f := newFixture(t, 200)
	ctx := context.Background()
	for name, url := range map[string]string{"direct": f.dsn, "proxy": f.via} {
		c, err := pgconn.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Conn.Close()
		h.Frontend.Send(&pgproto3.Parse{Query: "SELECT id FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 5"})
		h.Frontend.Send(&pgproto3.Bind{})
		h.Frontend.Send(&pgproto3.Execute{})
		h.Frontend.Send(&pgproto3.Terminate{})
		if err := h.Frontend.Flush(); err != nil {
			t.Fatal(err)
		}
		h.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadAll(h.Conn); err != nil {
			t.Errorf("%s: after Terminate: %v, want the connection closed", name, err)
		}
	}
}

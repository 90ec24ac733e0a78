//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"slices"
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
	"github.com/vecside/vecside/internal/resident"
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
	for name, url := range map[string]string{"direct": f.dsn, "proxy": f.via} {
		h := hijack(t, url)
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

// TestParseBounds: a statement whose code is past maxCode, or one
// that would take the parse budget past maxParsingCode, passes through
// unparsed and gets PostgreSQL's answer; a prepared statement past the
// session's maxRememberedCode is not kept, and passes through when run.
func TestParseBounds(t *testing.T) {
	f := newFixture(t, 500)
	ctx := context.Background()
	c := connect(t, f.via)
	small := "SELECT id FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 3"
	big := largeStatement(f.vector())
	for _, sql := range []string{big, small} {
		got, want := run(t, c, sql), run(t, f.db, sql)
		if fmt.Sprint(got.Rows) != fmt.Sprint(want.Rows) {
			t.Errorf("%.60s…: %v, PostgreSQL %v", sql, got.Rows, want.Rows)
		}
	}
	if n := f.p.Stats().Fallbacks["statement size"]; n != 1 {
		t.Errorf("%d statements passed through for their size, want 1", n)
	}
	if plan := lastPlan(t, c); !strings.HasPrefix(plan, "accelerated") {
		t.Errorf("the small statement after the large: %q", plan)
	}

	f.p.parsing.Add(maxParsingCode)
	run(t, c, small)
	f.p.parsing.Add(-maxParsingCode)
	if n := f.p.Stats().Fallbacks["parsing budget"]; n != 1 {
		t.Errorf("%d statements passed through for the parse budget, want 1", n)
	}

	// Prepared statements each of half the session's budget: the third
	// is not kept.
	filler := strings.Repeat("-1,", maxRememberedCode/2/3-100)
	for i := range 3 {
		sql := fmt.Sprintf("SELECT id FROM items WHERE id NOT IN (%s-%d) ORDER BY embedding <-> '%s' LIMIT 3", filler, i+2, f.vector())
		if _, err := c.Prepare(ctx, fmt.Sprint("s", i), sql); err != nil {
			t.Fatal(err)
		}
		before := f.p.Stats().Accelerated
		if _, err := c.Exec(ctx, fmt.Sprint("s", i)); err != nil {
			t.Fatal(err)
		}
		if accelerated, want := f.p.Stats().Accelerated > before, i < 2; accelerated != want {
			t.Errorf("prepared statement %d: accelerated %v, want %v", i, accelerated, want)
		}
	}
}

// TestExtremeStatements: a query vector whose distances overflow single
// precision, and a statement of 65,535 parameters, the protocol's most,
// get PostgreSQL's rows.
func TestExtremeStatements(t *testing.T) {
	f := newFixture(t, 500)
	ctx := context.Background()
	c := connect(t, f.via)
	huge := strings.Replace(f.vector(), "{", "{3.4028235e+38,", 1)
	huge = huge[:strings.LastIndex(huge, ",")] + "}"
	sql := "SELECT id FROM items ORDER BY embedding <-> '" + huge + "' LIMIT 10"
	if got, want := run(t, c, sql), run(t, f.db, sql); fmt.Sprint(got.Rows) != fmt.Sprint(want.Rows) || len(want.Rows) != 10 {
		t.Errorf("a component of FLT_MAX: %d rows %v, PostgreSQL's %d %v", len(got.Rows), got.Rows, len(want.Rows), want.Rows)
	}

	var sb strings.Builder
	args := make([]any, 0, maxParameters)
	sb.WriteString("SELECT id FROM items WHERE id NOT IN (")
	for i := 1; i < maxParameters; i++ {
		if i > 1 {
			sb.WriteString(",")
		}
		sb.WriteString("$" + strconv.Itoa(i))
		args = append(args, -i)
	}
	sb.WriteString(fmt.Sprintf(") ORDER BY embedding <-> $%d::real[] LIMIT 10", maxParameters))
	args = append(args, f.vector())
	ids := func(c *pgx.Conn) []int64 {
		rows, err := c.Query(ctx, sb.String(), args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatalf("65,535 parameters: %v", err)
		}
		return got
	}
	if got, want := ids(c), ids(f.db); !slices.Equal(got, want) || len(want) != 10 {
		t.Errorf("65,535 parameters: %v, PostgreSQL's %v", got, want)
	}
}

// largeStatement is an accelerable statement of about a MiB: a filter
// of 130,000 literals.
func largeStatement(vector string) string {
	var sb strings.Builder
	sb.WriteString("SELECT id FROM items WHERE id NOT IN (-2")
	for i := 3; sb.Len() < 1<<20-200-len(vector); i++ {
		sb.WriteString(",-" + strconv.Itoa(i))
	}
	sb.WriteString(") ORDER BY embedding <-> '" + vector + "' LIMIT 10")
	return sb.String()
}

// BenchmarkLargeStatements measures what statements of a MiB that the
// proxy may answer cost its process (this one: the proxy, the sidecar
// and the client): burst, 16 sessions sending one each at once, the
// resident memory's growth at its peak and 30 s later; loop, how much
// slower a connected client's accelerated statement is while 64
// sessions send them in a loop, beside the same statement straight to
// PostgreSQL then.
//
//	go test ./rpc/proxy -run '^$' -bench LargeStatements -benchtime 1x
func BenchmarkLargeStatements(b *testing.B) {
	f := newFixture(b, 2000)
	big := largeStatement(f.vector())
	sessions := func(n int) []*pgx.Conn {
		cs := make([]*pgx.Conn, n)
		for i := range cs {
			cs[i] = connect(b, f.via)
		}
		return cs
	}
	b.Run("burst", func(b *testing.B) {
		cs := sessions(16)
		var peak, after float64
		for b.Loop() {
			runtime.GC()
			debug.FreeOSMemory()
			start := resident.MiB(b)
			stop := resident.Peak(b, 5*time.Millisecond)
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Go(func() { run(b, c, big) })
			}
			wg.Wait()
			peak = stop() - start
			time.Sleep(30 * time.Second)
			after = resident.MiB(b) - start
		}
		b.ReportMetric(peak, "peak-growth-MiB")
		b.ReportMetric(after, "growth-after-30s-MiB")
	})
	b.Run("loop", func(b *testing.B) {
		client, direct := connect(b, f.via), connect(b, f.dsn)
		query := "SELECT id FROM items ORDER BY embedding <-> '" + f.vector() + "' LIMIT 10"
		p50 := func(c *pgx.Conn) float64 {
			lat := make([]time.Duration, 50)
			for i := range lat {
				start := time.Now()
				run(b, c, query)
				lat[i] = time.Since(start)
			}
			slices.Sort(lat)
			return float64(lat[len(lat)/2].Microseconds()) / 1000
		}
		cs := sessions(64)
		var quiet, loaded, loadedDirect float64
		for b.Loop() {
			quiet = p50(client)
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Go(func() {
					for ctx.Err() == nil {
						c.Exec(ctx, big, pgx.QueryExecModeSimpleProtocol)
					}
				})
			}
			time.Sleep(time.Second)
			loaded, loadedDirect = p50(client), p50(direct)
			stop()
			wg.Wait()
		}
		b.ReportMetric(quiet, "quiet-p50-ms")
		b.ReportMetric(loaded, "loaded-p50-ms")
		b.ReportMetric(loaded/quiet, "slowdown")
		b.ReportMetric(loadedDirect, "loaded-direct-p50-ms")
	})
}

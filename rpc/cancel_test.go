//go:build unix

package rpc

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
)

// Size of the exact index the CPU test searches: one pass takes a few
// milliseconds, and the flat index checks its context every 16,384 rows.
// The race detector makes building it slow: a smaller one does then.
const (
	bigRows = 100_000
	bigDims = 256
)

func bigIndexRows() int {
	if raceEnabled {
		return bigRows / 5
	}
	return bigRows
}

// repeatCatalog makes each search of the index "big" as long as a search
// of an index far larger than a test can build: it searches again and
// again, until the index returns an error (its context ended) or
// repeatFor has passed. It records when the context ended and when the
// index gave up, to measure how promptly the index honours it.
type repeatCatalog struct {
	*indexer.Indexer
	entered chan time.Time // when a search of "big" starts

	mu      sync.Mutex
	stopLag time.Duration // longest wait from a context's end to the index returning
}

// repeatFor bounds a search the server fails to stop.
const repeatFor = 5 * time.Second

func (r *repeatCatalog) Search(ctx context.Context, name string, q []float32, k int, opts indexer.SearchOptions) (indexer.Result, error) {
	if name != "big" {
		return r.Indexer.Search(ctx, name, q, k, opts)
	}
	start := time.Now()
	r.entered <- start
	var ended time.Time
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		ended = time.Now()
		r.mu.Unlock()
	})
	defer stop()
	for {
		res, err := r.Indexer.Search(ctx, name, q, k, opts)
		if err != nil || time.Since(start) > repeatFor {
			r.mu.Lock()
			if !ended.IsZero() {
				r.stopLag = max(r.stopLag, time.Since(ended))
			}
			r.mu.Unlock()
			return res, err
		}
	}
}

func newRepeatCatalog(t *testing.T) *repeatCatalog {
	ix := randomIndex(t, "big=public.items(embedding) key=id metric=l2 kind=flat", bigDims, bigIndexRows(), 7)
	return &repeatCatalog{Indexer: ix, entered: make(chan time.Time, 1)}
}

// processCPU is the CPU time the test process has used so far.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuDuring is the CPU time the process uses in the next d.
func cpuDuring(t *testing.T, d time.Duration) time.Duration {
	before := processCPU(t)
	time.Sleep(d)
	return processCPU(t) - before
}

// sendCancel sends a CancelRequest with key and waits until the server has
// handled it (it closes the connection without a reply).
func sendCancel(t *testing.T, addr string, key *pgproto3.BackendKeyData) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	pkt, _ := (&pgproto3.CancelRequest{ProcessID: key.ProcessID, SecretKey: key.SecretKey}).Encode(nil)
	if _, err := nc.Write(pkt); err != nil {
		t.Fatal(err)
	}
	nc.Read(make([]byte, 1))
}

// running is a search a test has started on a connection it drives by
// hand.
type running struct {
	addr    string // the server's
	raw     *rawConn
	key     *pgproto3.BackendKeyData
	entered time.Time // when the Catalog was called
}

// TestSearchStopsWorking: a search that is cancelled, whose client goes
// away, or whose timeout passes stops using the CPU within 50 ms, and is
// not merely abandoned by the server. Process CPU time is measured over a
// window while the search runs (it must be busy, or the test proves
// nothing) and over a window starting 50 ms after the search was ended
// (it must be idle). The client is driven by hand: a driver would send a
// CancelRequest of its own before closing.
func TestSearchStopsWorking(t *testing.T) {
	const timeout = 400 * time.Millisecond // longer than stopsWorking's window
	cat := newRepeatCatalog(t)
	cases := []struct {
		name    string
		options string
		// stop ends the running search and returns when it did.
		stop func(t *testing.T, s running) time.Time
		// want is a part of the error the client is sent; "" if it is
		// gone.
		want string
	}{
		{name: "CancelRequest", want: "canceling statement due to user request",
			stop: func(t *testing.T, s running) time.Time {
				at := time.Now()
				sendCancel(t, s.addr, s.key)
				return at
			}},
		{name: "client closes",
			stop: func(t *testing.T, s running) time.Time {
				at := time.Now()
				s.raw.nc.Close()
				return at
			}},
		{name: "client closes after pipelining a query",
			stop: func(t *testing.T, s running) time.Time {
				// The server does not read during a request: the query
				// waits in its socket buffer, ahead of the close.
				s.raw.fe.Send(&pgproto3.Query{String: "SELECT 1"})
				if err := s.raw.fe.Flush(); err != nil {
					t.Fatal(err)
				}
				at := time.Now()
				s.raw.nc.Close()
				return at
			}},
		{name: "timeout", options: "timeout=" + timeout.String(), want: "statement timeout",
			stop: func(t *testing.T, s running) time.Time {
				deadline := s.entered.Add(timeout)
				time.Sleep(time.Until(deadline))
				return deadline
			}},
	}
	// Both ways the server makes calls: on the connection's goroutine (a
	// prompt Catalog, as the sidecar's is) and on one of their own.
	for _, prompt := range []bool{true, false} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/prompt=%v", c.name, prompt), func(t *testing.T) {
				stopsWorking(t, cat, c.options, c.stop, c.want, prompt)
			})
		}
	}
	cat.mu.Lock()
	defer cat.mu.Unlock()
	t.Logf("the flat index returned at most %v after its context ended", cat.stopLag)
}

// stopsWorking starts a search of cat's index with options on a server
// of its own, ends it with stop, and checks that it stops using the CPU
// and that the client is told want ("" if it is gone).
func stopsWorking(t *testing.T, cat *repeatCatalog, options string, stop func(*testing.T, running) time.Time, want string, prompt bool) {
	const (
		window = 250 * time.Millisecond
		grace  = 50 * time.Millisecond
	)
	if want == "" && !detectsClientGone {
		t.Skip("closed client connections are not detected on this platform")
	}
	// A server of its own, whose shutdown stops whatever the subtest
	// failed to, so that it cannot busy the next one.
	_, addr := startServerConfig(t, Config{Catalog: cat, PromptCatalog: prompt, Auth: "trust", Version: "test"})
	raw := dialRaw(t, addr)
	var key *pgproto3.BackendKeyData
	for _, m := range raw.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"}) {
		if k, ok := m.(*pgproto3.BackendKeyData); ok {
			key = k
		}
	}
	q := vectorText(make([]float32, bigDims))
	raw.fe.Send(&pgproto3.Query{String: "SELECT * FROM knn('big', '" + q + "', 10, '" + options + "')"})
	if err := raw.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	s := running{addr: addr, raw: raw, key: key}
	select {
	case s.entered = <-cat.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the search did not start")
	}
	busy := cpuDuring(t, window)
	stopped := stop(t, s)
	time.Sleep(time.Until(stopped.Add(grace)))
	// Up to one core, as much as the machine's other work leaves the
	// search.
	if busy < window/12 {
		t.Fatalf("only %v of CPU over %v while the search ran: the test measures nothing", busy, window)
	}
	// A little for the test's own goroutines and the GC; a search still
	// running would take about as much as before, in every window, where
	// the GC or a finished test's cleanup takes one.
	limit := min(10*time.Millisecond, busy/4)
	idle := []time.Duration{cpuDuring(t, window)}
	for len(idle) < 3 && idle[len(idle)-1] > limit {
		idle = append(idle, cpuDuring(t, window))
	}
	t.Logf("CPU over %v: %v while searching, %v from %v after the search was ended", window, busy, idle, grace)
	if slices.Min(idle) > limit {
		t.Errorf("%v of CPU in each of %d windows of %v, starting %v after the search was ended (more than %v): it is still running", idle, len(idle), window, grace, limit)
	}
	if want != "" {
		got := raw.until()
		if e, ok := got[0].(*pgproto3.ErrorResponse); !ok || !strings.Contains(e.Message, want) {
			t.Errorf("the client got %s %+v, want an error saying %q", describeMsgs(got), got[0], want)
		}
	}
}

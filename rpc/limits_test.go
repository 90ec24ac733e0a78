package rpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Tests of what a hostile client can do to the server: each holds the
// server to a limit, checks that it keeps serving, and bounds the memory
// the attack costs it.

// flakyListener fails its first accepts as a process out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// checkServing fails the test unless a new client can connect and query.
func checkServing(t *testing.T, addr string) {
	t.Helper()
	conn, err := pgx.Connect(testContext(t), connString(addr))
	if err != nil {
		t.Fatalf("the server does not take a new client: %v", err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(testContext(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d, %v", one, err)
	}
}

// Finding 1: a failing accept (EMFILE) ended Serve, and the sidecar with
// it.
func TestAcceptErrorsDoNotStopServe(t *testing.T) {
	ix, _ := newTestIndexer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln}
	fl.failures.Store(5)
	serveOn(t, Config{Catalog: ix, Auth: "trust"}, fl)
	checkServing(t, ln.Addr().String())
}

// readFatal reads from nc until a FATAL error, EOF or 5 s; it returns the
// error's SQLSTATE, or "" if there was none.
func readFatal(nc net.Conn) string {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	fe := pgproto3.NewFrontend(nc, nc)
	for {
		m, err := fe.Receive()
		if err != nil {
			return ""
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok && e.Severity == "FATAL" {
			return e.Code
		}
	}
}

// Finding 1: connections that had not finished startup did not count:
// silent ones held a goroutine and a file descriptor each, until accept
// failed for want of descriptors. Now MaxStartups of them are held at
// most: each new one takes the slot of the one silent longest, which is
// told why (53300) and closed.
func TestSilentConnectionsAreCapped(t *testing.T) {
	ix, _ := newTestIndexer(t)
	const maxStartups, extra = 8, 300
	_, addr := startServerConfig(t, Config{Catalog: ix, Auth: "trust",
		Limits: Limits{MaxStartups: maxStartups, AuthTimeout: 2 * time.Second}})
	mem := watchMemory()
	start := time.Now()
	var silent []net.Conn
	for range maxStartups + extra {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.Write([]byte{0, 0}) // half a startup packet
		silent = append(silent, nc)
	}
	for i, nc := range silent[:extra] {
		if code := readFatal(nc); code != codeTooManyConnections {
			t.Fatalf("silent connection %d of %d: got %q, want FATAL 53300 once newer ones took its slot", i, len(silent), code)
		}
	}
	t.Logf("%d silent connections evicted in %v", extra, time.Since(start))
	for i, nc := range silent[extra:] {
		if code := readFatal(nc); code != codeQueryCanceled {
			t.Errorf("silent connection %d: got %q, want FATAL 57014 at the authentication timeout", extra+i, code)
		}
	}
	mem.check(t, "silent connections", 8<<20)
	checkServing(t, addr)
}

// newWideIndex adds a ready index "wide" of n 4-d vectors, so that a knn
// of k = n returns n rows.
func newWideIndex(t *testing.T, ix *indexer.Indexer, n int) {
	e := addIndex(t, ix, "wide", pgvalue.KeyInt8)
	for i := range n {
		key, _ := pgvalue.KeyInt8.DecodeText(strconv.Itoa(i))
		e.Stream().Upsert(key, []float32{float32(i), 1, 2, 3})
	}
	e.SetReady()
}

// Finding 2: replies were buffered until Sync, Flush or the end of a
// simple Query: a client that pipelines requests without reading could
// make the server hold any amount of them. Now the server writes them
// out past MaxReplyBuffer, and stops reading until the client takes them.
func TestPipelinedRepliesAreBounded(t *testing.T) {
	const rows = indexer.MaxCandidates
	requests := 200 // about 60 MB of replies
	if raceEnabled {
		requests = 30 // reading them back is what takes the race detector long
	}
	ix, _ := newTestIndexer(t)
	newWideIndex(t, ix, rows)
	_, addr := startServer(t, ix)
	query := fmt.Sprintf("SELECT * FROM knn('wide', '[0,0,0,0]', %d)", rows)
	for _, simple := range []bool{false, true} {
		name := map[bool]string{false: "extended", true: "simple"}[simple]
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, addr)
			r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})
			r.nc.SetDeadline(time.Now().Add(60 * time.Second))
			mem := watchMemory()
			if simple {
				r.fe.Send(&pgproto3.Query{String: strings.Repeat(query+";", requests)})
			} else {
				r.fe.Send(&pgproto3.Parse{Query: query})
				for range requests {
					r.fe.Send(&pgproto3.Bind{})
					r.fe.Send(&pgproto3.Execute{})
				}
				r.fe.Send(&pgproto3.Sync{})
			}
			if err := r.fe.Flush(); err != nil {
				t.Fatal(err)
			}
			// Read nothing while the server answers what it can.
			time.Sleep(1500 * time.Millisecond)
			mem.check(t, fmt.Sprintf("%d unread results of %d rows, %s protocol", requests, rows, name), 32<<20)
			completed := 0
			for done := false; !done; {
				m, err := r.fe.Receive()
				switch m := m.(type) {
				case *pgproto3.CommandComplete:
					if string(m.CommandTag) != "SELECT "+strconv.Itoa(rows) {
						t.Fatalf("got %q", m.CommandTag)
					}
					completed++
				case *pgproto3.ErrorResponse:
					t.Fatalf("error: %s %s", m.Code, m.Message)
				case *pgproto3.ReadyForQuery:
					done = true
				case nil:
					t.Fatalf("after %d results: %v", completed, err)
				}
			}
			if completed != requests {
				t.Fatalf("%d results, want %d", completed, requests)
			}
		})
	}
	checkServing(t, addr)
}

// Finding 3: prepared statements were unlimited: a client could make the
// server hold as many megabyte-long statements as it sent. Now a session
// holds at most MaxPrepared statements and portals of MaxPreparedBytes
// in all, and is told so with 54000.
func TestPreparedStatementsAreBounded(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServerConfig(t, Config{Catalog: ix, Auth: "trust", Limits: Limits{MaxPrepared: 50}})
	r := dialRaw(t, addr)
	r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})

	// Large statements: a 200 KB literal each, 300 of them (60 MB).
	big := "SELECT * FROM knn('items_int8', '[" + strings.Repeat("0,", 100_000) + "0]', 1)"
	mem := watchMemory()
	var created int
	for i := range 300 {
		got := r.send(&pgproto3.Parse{Name: "big" + strconv.Itoa(i), Query: big}, &pgproto3.Sync{})
		if e, ok := got[0].(*pgproto3.ErrorResponse); ok {
			if e.Code != codeProgramLimitExceeded {
				t.Fatalf("Parse %d: %s %s, want 54000", i, e.Code, e.Message)
			}
			break
		}
		created++
	}
	mem.check(t, "300 Parses of 200 KB", 16<<20)
	if max := DefaultLimits.MaxPreparedBytes / len(big); created > max || created == 300 {
		t.Fatalf("%d statements of %d bytes held, want at most %d", created, len(big), max)
	}
	// Closing one makes room again.
	got := r.send(&pgproto3.Close{ObjectType: 'S', Name: "big0"}, &pgproto3.Parse{Name: "again", Query: big}, &pgproto3.Sync{})
	if _, ok := got[1].(*pgproto3.ParseComplete); !ok {
		t.Fatalf("Parse after Close: %s", describeMsgs(got))
	}

	// Many small ones: statements and portals count together.
	r.send(&pgproto3.Query{String: "DEALLOCATE ALL"})
	r.send(&pgproto3.Parse{Name: "s", Query: "SELECT 1"}, &pgproto3.Sync{})
	r.send(&pgproto3.Query{String: "BEGIN"}) // portals live until the transaction ends
	var errCode string
	n := 1
	for ; n <= 60 && errCode == ""; n++ {
		got := r.send(&pgproto3.Bind{DestinationPortal: "p" + strconv.Itoa(n), PreparedStatement: "s"}, &pgproto3.Flush{}, &pgproto3.Sync{})
		if e, ok := got[0].(*pgproto3.ErrorResponse); ok {
			errCode = e.Code
		}
	}
	if errCode != codeProgramLimitExceeded || n-1 != 50 {
		t.Fatalf("Bind %d failed with %q; want Bind 50 (the 51st statement or portal) to fail with 54000", n-1, errCode)
	}
	checkServing(t, addr)
}

// Finding 4: the parser took about 40 bytes and a microsecond for every
// 1-byte token, so that a megabyte of semicolons took 140 MB. Now it
// lexes as it parses: its memory is what the statements it returns hold.
func TestParserBudget(t *testing.T) {
	const size = maxMessageLen - 1
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	for _, c := range []struct {
		name, sql string
		code      string // the error expected, "" for none
	}{
		{"semicolons", fill(";"), ""},
		{"comments", fill("/**/"), ""},
		{"line comments", fill("--\n"), ""},
		{"SELECT 1", fill("SELECT 1;"), codeProgramLimitExceeded},
		{"set list", "SET application_name = " + fill("a,") + "a", codeProgramLimitExceeded},
		{"columns", "SELECT " + fill("id,") + "id FROM knn('a', 'b', 1)", codeTooManyColumns},
		{"arguments", "SELECT * FROM knn(" + fill("1,") + "1)", codeUndefinedFunction},
		{"quotes", "SELECT * FROM knn('" + fill("''") + "', '[1]', 1)", ""},
		{"E string", "SELECT * FROM knn(E'" + fill(`\\`) + "', '[1]', 1)", ""},
		{"late error", fill(" ") + "?", codeSyntaxError},
	} {
		var before, after runtimeStats
		before.read()
		start := time.Now()
		_, err := parseQuery(c.sql, DefaultLimits.MaxQueryStatements)
		took := time.Since(start)
		after.read()
		if got := sqlstateOf(err); got != c.code {
			t.Errorf("%s: got %q (%v), want %q", c.name, got, err, c.code)
		}
		alloc := after.alloc - before.alloc
		t.Logf("%s: %d bytes parsed with %d bytes allocated in %v", c.name, len(c.sql), alloc, took)
		if limit := uint64(2*len(c.sql) + 64<<10); alloc > limit {
			t.Errorf("%s: parsing %d bytes allocated %d bytes, more than %d", c.name, len(c.sql), alloc, limit)
		}
	}
}

// sqlstateOf is err's SQLSTATE, "" for nil.
func sqlstateOf(err error) string {
	if err == nil {
		return ""
	}
	return toPgError(err).code
}

// runtimeStats are the allocation counters parsing is measured with.
type runtimeStats struct{ alloc uint64 }

func (s *runtimeStats) read() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.alloc = m.TotalAlloc
}

// Finding 4, end to end: clients sending megabyte queries at once.
func TestLargeQueriesAreCheap(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	const clients = 4
	query := strings.Repeat(";", maxMessageLen-1)
	mem := watchMemory()
	var wg sync.WaitGroup
	for range clients {
		r := dialRaw(t, addr)
		r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})
		wg.Go(func() {
			for range 3 {
				r.fe.Send(&pgproto3.Query{String: query})
				if err := r.fe.Flush(); err != nil {
					t.Error(err)
					return
				}
				m, err := r.fe.Receive()
				if _, ok := m.(*pgproto3.EmptyQueryResponse); err != nil || !ok {
					t.Errorf("got %T %v, want EmptyQueryResponse", m, err)
					return
				}
				r.fe.Receive() // ReadyForQuery
			}
		})
	}
	wg.Wait()
	// The clients' own buffers count too: about 2 MiB each.
	mem.check(t, fmt.Sprintf("%d clients sending 1 MiB queries of semicolons", clients), 24<<20)
	checkServing(t, addr)
}

// Finding 5: with no idle timeout and a fixed cap of 256, idle or
// half-sent sessions could lock every other client out for as long as
// they stayed. Now the cap is configurable, a few sessions are reserved
// for the admin user, and idle sessions end after IdleTimeout.
func TestIdleSessionsAndReservedSlots(t *testing.T) {
	ix, _ := newTestIndexer(t)
	const idle = time.Second
	_, addr := startServerConfig(t, Config{Catalog: ix, Auth: "trust", AdminUser: "admin",
		Limits: Limits{MaxConnections: 4, ReservedConnections: 1, IdleTimeout: idle}})
	connectAs := func(user string) (*pgconn.PgConn, error) {
		dsn := strings.Replace(connString(addr), "tester@", user+"@", 1)
		return pgconn.Connect(testContext(t), dsn)
	}
	mem := watchMemory()
	var sessions []*rawConn
	for i := range 3 {
		r := dialRaw(t, addr)
		r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "user" + strconv.Itoa(i)})
		sessions = append(sessions, r)
	}
	// One of them sends half a message and stops.
	sessions[2].nc.Write([]byte{'Q', 0, 0, 1, 0, 'S'})
	opened := time.Now()
	if _, err := connectAs("user3"); sqlstate(err) != codeTooManyConnections || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("fourth session: %v, want 53300 (reserved for the admin)", err)
	}
	admin, err := connectAs("admin")
	if err != nil {
		t.Fatalf("admin in the reserved slot: %v", err)
	}
	defer admin.Close(context.Background())
	if _, err := connectAs("admin"); sqlstate(err) != codeTooManyConnections {
		t.Fatalf("fifth session: %v, want 53300", err)
	}
	for i, r := range sessions {
		if code := readFatal(r.nc); code != codeIdleSessionTimeout {
			t.Errorf("idle session %d: got %q, want FATAL 57P05", i, code)
		}
	}
	if waited := time.Since(opened); waited > idle+2*time.Second {
		t.Errorf("idle sessions ended after %v, with an idle timeout of %v", waited, idle)
	}
	mem.check(t, "idle and half-sent sessions", 8<<20)
	checkServing(t, addr)
}

// countingHandler counts the log records written at WARN or above.
type countingHandler struct{ warnings atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warnings.Add(1)
	}
	return nil
}

// Finding 6: every protocol violation and bad cancel key wrote a log
// line. Now each kind is counted in /metrics and logged at most once per
// faultLogInterval.
func TestFaultsAreCountedAndSampled(t *testing.T) {
	ix, _ := newTestIndexer(t)
	logs := &countingHandler{}
	srv, addr := startServerConfig(t, Config{Catalog: ix, Auth: "trust", Logger: slog.New(logs)})
	const n = 100
	mem := watchMemory()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 { // a cancel with a wrong key
					pkt, _ := (&pgproto3.CancelRequest{ProcessID: uint32(i), SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
					nc.Write(pkt)
				} else { // a message type that does not exist
					pkt, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "x"}}).Encode(nil)
					nc.Write(append(pkt, 'y', 0, 0, 0, 4))
				}
				nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				io.Copy(io.Discard, nc)
				nc.Close()
			}
		})
	}
	wg.Wait()
	mem.check(t, "bad cancels and protocol violations", 8<<20)
	if got := logs.warnings.Load(); got > 4 {
		t.Errorf("%d warnings logged for %d faults of 2 kinds, want at most 2 per kind", got, n)
	}
	faults := srv.Stats().Faults
	var counted uint64
	for _, kind := range []faultKind{faultProtocol, faultBadCancel, faultCancelDropped} {
		counted += faults[string(kind)]
	}
	if counted != uint64(n) {
		t.Errorf("Stats counts %d faults, want %d: %v", counted, n, faults)
	}
	checkServing(t, addr)
}

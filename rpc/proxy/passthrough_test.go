//go:build cgo

package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/testcert"
)

var execModes = []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}

// outcome is everything a client sees of a statement, byte for byte.
type outcome struct {
	Fields []pgconn.FieldDescription
	Rows   [][][]byte
	Tag    string
	Err    string
}

func outcomes(rs []*pgconn.Result, err error) []outcome {
	var out []outcome
	for _, r := range rs {
		o := outcome{Fields: r.FieldDescriptions, Rows: r.Rows, Tag: r.CommandTag.String()}
		if r.Err != nil {
			o.Err = r.Err.Error()
		}
		out = append(out, o)
	}
	if err != nil {
		out = append(out, outcome{Err: err.Error()})
	}
	return out
}

// TestPassThrough: statements the proxy does not accelerate return what
// they return straight from PostgreSQL, byte for byte, through the
// simple and the extended protocol and every pgx exec mode; COPY both
// ways, notices, notifications, errors and messages larger than the
// proxy holds whole go through.
func TestPassThrough(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		dsn := pgtest.Shared(t).NewDatabase(t)
		p, via := startProxy(t, dsn, "")
		checkPassThrough(t, dsn, via)
		checkLooped(t, p)
	})
	// With a sidecar, the proxy holds extended-protocol batches back to
	// look at them, and parses what mentions a distance operator.
	t.Run("with a sidecar", func(t *testing.T) {
		dsn := pgtest.Shared(t).NewDatabase(t)
		mustExec(t, connect(t, dsn), "CREATE TABLE vt (id int PRIMARY KEY, v real[]); INSERT INTO vt VALUES (1, '{1,2}')")
		_, side := startSidecar(t, dsn, "vt_v=public.vt(v) key=id metric=l2")
		p, via := startProxy(t, dsn, side)
		checkPassThrough(t, dsn, via)
		checkLooped(t, p)
	})
}

// checkLooped checks that p's sessions, over plain sockets, were relayed
// by its loop.
func checkLooped(t *testing.T, p *Proxy) {
	t.Helper()
	if st := p.Stats(); runtime.GOOS == "linux" && (st.Looped == 0 || st.Looped != st.Sessions) {
		t.Errorf("%d of %d sessions relayed by the loop", st.Looped, st.Sessions)
	}
}

func checkPassThrough(t *testing.T, dsn, via string) {
	ctx := context.Background()
	direct, proxied := connect(t, dsn), connect(t, via)
	mustExec(t, proxied, `CREATE TABLE t (id int PRIMARY KEY, note text, v real[], at timestamptz DEFAULT '2024-01-02 03:04:05+00', b bytea);
		INSERT INTO t (id, note, v, b) SELECT g, 'note ' || g, ARRAY[g, g / 3.0]::real[], decode(md5(g::text), 'hex') FROM generate_series(1, 500) g`)
	queries := []string{
		"SELECT * FROM t ORDER BY id",
		"SELECT id, v, b FROM t WHERE id % 7 = 0 ORDER BY id DESC LIMIT 20",
		"SELECT count(*), sum(id), 1.5::numeric, now() > '2000-01-01', NULL::text",
		"SELECT 1; SELECT 'two'; SELECT 1/0; SELECT 3",
		"SHOW server_version",
		"UPDATE t SET note = note || '!' WHERE id < 10",
		"SELECT * FROM missing",
		"",
	}
	for _, q := range queries {
		want := outcomes(direct.PgConn().Exec(ctx, q).ReadAll())
		got := outcomes(proxied.PgConn().Exec(ctx, q).ReadAll())
		if !reflect.DeepEqual(got, want) {
			t.Errorf("simple %q:\n got %+v\nwant %+v", q, got, want)
		}
	}
	params := [][]byte{[]byte("10")}
	for _, formats := range [][]int16{nil, {1}} {
		q := "SELECT * FROM t WHERE id > $1 ORDER BY id"
		want := outcomes([]*pgconn.Result{direct.PgConn().ExecParams(ctx, q, params, nil, nil, formats).Read()}, nil)
		got := outcomes([]*pgconn.Result{proxied.PgConn().ExecParams(ctx, q, params, nil, nil, formats).Read()}, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("extended, formats %v: got %+v, want %+v", formats, got, want)
		}
	}
	for _, mode := range execModes {
		q := "SELECT id, note, v, at, b FROM t WHERE id > $1 AND note LIKE $2 ORDER BY id"
		want, err := pgx.CollectRows(must(direct.Query(ctx, q, mode, 480, "note%")), pgx.RowToMap)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(must(proxied.Query(ctx, q, mode, 480, "note%")), pgx.RowToMap)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%v: got %v, %v; want %v", mode, got, err, want)
		}
	}

	// COPY in (binary, through pgx) and out (text).
	n, err := proxied.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"id", "note"}, pgx.CopyFromRows([][]any{{1001, "c1"}, {1002, "c2"}}))
	if err != nil || n != 2 {
		t.Fatalf("CopyFrom: %d, %v", n, err)
	}
	var viaOut, directOut bytes.Buffer
	if _, err := proxied.PgConn().CopyTo(ctx, &viaOut, "COPY (SELECT * FROM t ORDER BY id) TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.PgConn().CopyTo(ctx, &directOut, "COPY (SELECT * FROM t ORDER BY id) TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(viaOut.Bytes(), directOut.Bytes()) || !strings.Contains(viaOut.String(), "c2") {
		t.Errorf("COPY TO differs: %d bytes through the proxy, %d direct", viaOut.Len(), directOut.Len())
	}

	// A value larger than the proxy reads whole (MaxMessage), both ways
	// and through both protocols.
	big := strings.Repeat("x", 3<<20)
	mustExec(t, proxied, "INSERT INTO t (id, note) VALUES (2001, $1)", big)
	mustExec(t, proxied, "INSERT INTO t (id, note) VALUES (2002, '"+big+"')")
	var back string
	if err := proxied.QueryRow(ctx, "SELECT string_agg(note, '') FROM t WHERE id IN (2001, 2002)").Scan(&back); err != nil || back != big+big {
		t.Errorf("large values: %d bytes back, %v; want %d", len(back), err, 2*len(big))
	}

	// Errors keep their fields; the session goes on.
	_, err = proxied.Exec(ctx, "SELECT 1/0")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" {
		t.Errorf("SELECT 1/0: %v, want 22012", err)
	}
}

// TestNoticesAndNotifications: NoticeResponse and NotificationResponse
// reach the client, the latter also while it waits between statements.
func TestNoticesAndNotifications(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	_, via := startProxy(t, dsn, "")
	cfg, err := pgx.ParseConfig(via)
	if err != nil {
		t.Fatal(err)
	}
	notices := make(chan string, 1)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices <- n.Message }
	proxied, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer proxied.Close(ctx)
	mustExec(t, proxied, "DO $$ BEGIN RAISE NOTICE 'hello'; END $$")
	if got := <-notices; got != "hello" {
		t.Errorf("notice %q, want hello", got)
	}
	mustExec(t, proxied, "LISTEN ch")
	mustExec(t, connect(t, dsn), "NOTIFY ch, 'payload'")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := proxied.WaitForNotification(wctx)
	if err != nil || n.Payload != "payload" {
		t.Errorf("notification: %v, %v", n, err)
	}
}

// TestSlowReader: a client that does not read its results stops its own
// session's reading, so that PostgreSQL waits to send it more (as it
// would for the client direct) and the proxy holds no more than its
// buffers; every other session goes on meanwhile; and the results, read
// at last, are whole. The loop relays every session on one thread: a
// write it waited for would stop them all.
func TestSlowReader(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	_, via := startProxy(t, dsn, "")
	direct, slow, other := connect(t, dsn), connect(t, via), connect(t, via)
	var pid int
	if err := slow.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// 64 rows of 2 MiB: more than the sockets' buffers, and each row
	// larger than Limits.MaxMessage, so it passes in pieces.
	const rows, width = 64, 2 << 20
	results := slow.PgConn().Exec(ctx, fmt.Sprintf("SELECT repeat('x', %d) FROM generate_series(1, %d)", width, rows))
	var wait string
	for deadline := time.Now().Add(20 * time.Second); wait != "ClientWrite"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the unread session's backend waits on %q, not to write to its client", wait)
		}
		if err := direct.QueryRow(ctx, "SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&wait); err != nil {
			t.Fatal(err)
		}
	}
	stalled := time.Now()
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range 20 {
		var n int
		if err := other.QueryRow(octx, "SELECT $1::int", i).Scan(&n); err != nil || n != i {
			t.Fatalf("another session while one does not read: %d, %v", n, err)
		}
	}
	// Still waiting two seconds on: had the proxy read on, PostgreSQL
	// would have sent the 128 MiB long before.
	time.Sleep(time.Until(stalled.Add(2 * time.Second)))
	var state string
	if err := direct.QueryRow(ctx, "SELECT state, coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state, &wait); err != nil {
		t.Fatal(err)
	}
	if state != "active" || wait != "ClientWrite" {
		t.Fatalf("two seconds on, the unread session's backend is %s, waiting on %q: the proxy read its results", state, wait)
	}
	got, err := results.ReadAll()
	if err != nil || len(got) != 1 || len(got[0].Rows) != rows {
		t.Fatalf("the unread results, read at last: %d results, %v", len(got), err)
	}
	for i, row := range got[0].Rows {
		if len(row[0]) != width || bytes.Count(row[0], []byte("x")) != width {
			t.Fatalf("row %d: %d bytes", i, len(row[0]))
		}
	}
}

// TestCancel: a cancel request with the proxy's key reaches the backend
// running the statement.
func TestCancel(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	_, via := startProxy(t, dsn, "")
	proxied := connect(t, via)
	ctx := context.Background()
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := proxied.PgConn().CancelRequest(ctx); err != nil {
			t.Errorf("CancelRequest: %v", err)
		}
	}()
	start := time.Now()
	_, err := proxied.Exec(ctx, "SELECT pg_sleep(30)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" || time.Since(start) > 10*time.Second {
		t.Errorf("after %v: %v, want 57014 (canceling statement due to user request)", time.Since(start), err)
	}
	var one int
	if err := proxied.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("after the cancel: %d, %v", one, err)
	}
}

// TestSCRAM: a role that PostgreSQL asks for a SCRAM password logs in
// through the proxy with its own password, works as itself, and a wrong
// password gets PostgreSQL's 28P01.
func TestSCRAM(t *testing.T) {
	ctx := context.Background()
	cl := pgtest.Shared(t)
	dsn := cl.NewDatabase(t)
	scramRole(t, cl, connect(t, dsn))
	_, via := startProxy(t, dsn, "")
	good := strings.Replace(via, "postgres@", "scram_user:sekrit@", 1)
	c := connect(t, good)
	var who string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != "scram_user" {
		t.Errorf("current_user %q, %v; want scram_user", who, err)
	}
	_, err := pgx.Connect(ctx, strings.Replace(via, "postgres@", "scram_user:wrong@", 1))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("wrong password: %v, want 28P01", err)
	}
}

// scramRole creates scram_user, password sekrit, whom the cluster asks
// for it over TCP with SCRAM-SHA-256.
func scramRole(t *testing.T, cl *pgtest.Cluster, db *pgx.Conn) {
	t.Helper()
	mustExec(t, db, "SET password_encryption = 'scram-sha-256'")
	mustExec(t, db, "DO $$ BEGIN CREATE ROLE scram_user LOGIN PASSWORD 'sekrit'; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
	hba := filepath.Join(cl.Dir, "data", "pg_hba.conf")
	if out, err := exec.Command("sh", "-c", fmt.Sprintf(`grep -q scram_user %[1]s || sed -i '1i host all scram_user 127.0.0.1/32 scram-sha-256' %[1]s`, hba)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	mustExec(t, db, "SELECT pg_reload_conf()")
}

// TestPsql: psql's output through the proxy is its output direct.
func TestPsql(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		missingTool(t, "no psql: scripts/install-postgres installs it")
	}
	dsn := pgtest.Shared(t).NewDatabase(t)
	_, via := startProxy(t, dsn, "")
	script := `CREATE TABLE p (id int, v real[]);
INSERT INTO p SELECT g, ARRAY[g, -g]::real[] FROM generate_series(1, 5) g;
SELECT * FROM p ORDER BY id;
\copy p TO STDOUT
SELECT 1/0;
SELECT count(*) FROM p;
DROP TABLE p;`
	run := func(url string) string {
		cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=0", "-d", url)
		cmd.Stdin = strings.NewReader(script)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	want := run(dsn)
	if got := run(via); got != want {
		t.Errorf("through the proxy:\n%s\ndirect:\n%s", got, want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestLimits: past MaxConnections a client is refused with 53300 before
// anything is read; a connection that does not authenticate within
// AuthTimeout is closed and gives its place back.
func TestLimits(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	p, via := startProxyWith(t, dsn, "", Config{Limits: Limits{MaxConnections: 2, MaxStartups: 3, AuthTimeout: 2 * time.Second}})
	addr := strings.Split(strings.TrimPrefix(via, "postgres://postgres@"), "/")[0]

	// A flood of connections that send nothing takes no session and
	// keeps no client out: a newcomer takes the slot of the one silent
	// longest, which is told why. (The second session finds the first's
	// startup slot free again.)
	var silent []net.Conn
	for range 3 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		silent = append(silent, nc)
	}
	var sessions []*pgx.Conn
	for range 2 {
		c, err := pgx.Connect(ctx, via)
		if err != nil {
			t.Fatalf("beside %d silent connections: %v", len(silent), err)
		}
		defer c.Close(ctx)
		sessions = append(sessions, c)
	}
	silent[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if msg, err := io.ReadAll(silent[0]); !bytes.Contains(msg, []byte("53300")) || err != nil {
		t.Errorf("the first silent connection, its slot taken: %q, %v; want 53300", msg, err)
	}
	if n := p.Stats().Evicted; n != 1 {
		t.Errorf("%d connections evicted, want 1", n)
	}

	// Sessions are bounded by MaxConnections.
	_, err := pgx.Connect(ctx, via)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Errorf("a third session: %v, want 53300", err)
	}
	sessions[0].Close(ctx)
	var c *pgx.Conn
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = pgx.Connect(ctx, via); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("after a session ended: %v", err)
	}
	defer c.Close(ctx)

	// The others are closed at AuthTimeout.
	for _, nc := range silent[1:] {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(nc); err != nil {
			t.Errorf("a silent connection after AuthTimeout: %v, want EOF", err)
		}
	}

	// Wrong cancel keys pause a second each, without their slots.
	c.Close(ctx)
	for i := range 5 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		msg := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 16}, cancelRequestCode)
		nc.Write(binary.BigEndian.AppendUint64(msg, uint64(i)))
		defer nc.Close()
		time.Sleep(20 * time.Millisecond) // read, and its slot given back
	}
	time.Sleep(100 * time.Millisecond)
	if c, err = pgx.Connect(ctx, via); err != nil {
		t.Fatalf("while wrong cancel keys pause: %v", err)
	}
	c.Close(ctx)
	if n := p.Stats().BadCancels; n != 5 {
		t.Errorf("%d wrong cancel keys counted, want 5", n)
	}
}

// TestUpstreamRestart: a session whose PostgreSQL restarts gets the error
// a direct client gets, and new sessions work once it is back.
func TestUpstreamRestart(t *testing.T) {
	ctx := context.Background()
	cl := pgtest.Shared(t)
	dsn := cl.NewDatabase(t)
	_, via := startProxy(t, dsn, "")
	direct, proxied := connect(t, dsn), connect(t, via)
	if err := cl.Restart("fast"); err != nil {
		t.Fatal(err)
	}
	_, derr := direct.Exec(ctx, "SELECT 1")
	_, perr := proxied.Exec(ctx, "SELECT 1")
	if derr == nil || perr == nil {
		t.Fatalf("after a restart: direct %v, proxied %v; want errors", derr, perr)
	}
	t.Logf("after a restart: direct %v; proxied %v", derr, perr)
	c := connect(t, via)
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("a new session: %d, %v", one, err)
	}
}

// TestTLS: with an sslmode that asks for it the session upstream is
// encrypted, and authentication and statements go through it as before;
// TLS from clients, and on both sides.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	cl := pgtest.Shared(t)
	dsn := cl.NewDatabase(t)
	db := connect(t, dsn)
	cert := testcert.New(t)
	data := filepath.Join(cl.Dir, "data")
	st, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	owner := st.Sys().(*syscall.Stat_t)
	for _, f := range []struct{ from, to string }{{cert.CertFile, "proxy_test.crt"}, {cert.KeyFile, "proxy_test.key"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(data, f.to)
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(to, int(owner.Uid), int(owner.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{"ALTER SYSTEM SET ssl_cert_file = 'proxy_test.crt'", "ALTER SYSTEM SET ssl_key_file = 'proxy_test.key'",
		"ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"} {
		mustExec(t, db, sql)
	}
	t.Cleanup(func() {
		c := connect(t, dsn)
		for _, sql := range []string{"ALTER SYSTEM RESET ssl", "ALTER SYSTEM RESET ssl_cert_file", "ALTER SYSTEM RESET ssl_key_file", "SELECT pg_reload_conf()"} {
			mustExec(t, c, sql)
		}
	})
	// PostgreSQL offers SCRAM-SHA-256-PLUS over TLS: a client of the
	// proxy, without TLS, takes SCRAM-SHA-256.
	scramRole(t, cl, db)
	verified := fmt.Sprintf("host=127.0.0.1 port=%d sslmode=verify-full sslrootcert=%s", cl.Port, cert.CertFile)
	var ssl bool
	for i, upstream := range []string{verified,
		// libpq's prefer takes TLS where the server offers it; a first
		// host that does not answer is passed over.
		fmt.Sprintf("postgres://127.0.0.1:1,127.0.0.1:%d/?sslmode=prefer", cl.Port)} {
		up, via := startProxyWith(t, dsn, "", Config{Upstream: upstream})
		via = strings.Replace(via, "postgres@", "scram_user:sekrit@", 1)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			c, err := pgx.Connect(ctx, via)
			if err == nil {
				err = c.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
				c.Close(ctx)
			}
			if err == nil && ssl || time.Now().After(deadline) {
				if err != nil || !ssl {
					t.Fatalf("upstream %d, through the proxy: ssl %v, %v", i, ssl, err)
				}
				break
			}
		}
		if st := up.Stats(); st.Looped != 0 {
			t.Errorf("upstream %d: %d sessions over TLS relayed by the loop", i, st.Looped)
		}
	}

	// TLS from the client, not upstream (the proxy beside PostgreSQL):
	// SCRAM with the client's default channel_binding=prefer, which
	// PostgreSQL, not offering channel binding without TLS, accepts.
	own := testcert.New(t) // the proxy's certificate, not PostgreSQL's
	_, via := startProxyWith(t, dsn, "", Config{ClientTLS: &tls.Config{Certificates: []tls.Certificate{own.TLS}}, ClientTLSRequired: true})
	secure := strings.Replace(via, "postgres@", "scram_user:sekrit@", 1)
	secure = strings.Replace(secure, "sslmode=disable", "sslmode=verify-full&sslrootcert="+url.QueryEscape(own.CertFile), 1)
	c := connect(t, secure)
	if _, ok := c.PgConn().Conn().(*tls.Conn); !ok {
		t.Errorf("the client's connection to the proxy is %T, want TLS", c.PgConn().Conn())
	}
	var who string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != "scram_user" {
		t.Errorf("over TLS: current_user %q, %v", who, err)
	}
	_, err = pgx.Connect(ctx, strings.Replace(via, "postgres@", "scram_user:sekrit@", 1))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" {
		t.Errorf("without TLS, TLS required: %v, want 28000", err)
	}

	// TLS on both sides: SCRAM's channel binding, which detects a party
	// in the middle, detects the proxy. A client that binds (libpq's and
	// pgx's default over TLS) is refused by PostgreSQL; one with
	// channel_binding=disable gets in.
	_, via = startProxyWith(t, dsn, "", Config{Upstream: verified, ClientTLS: &tls.Config{Certificates: []tls.Certificate{own.TLS}}})
	secure = strings.Replace(via, "postgres@", "scram_user:sekrit@", 1)
	secure = strings.Replace(secure, "sslmode=disable", "sslmode=verify-full&sslrootcert="+url.QueryEscape(own.CertFile), 1)
	if _, err := pgx.Connect(ctx, secure); !errors.As(err, &pe) || pe.Code != "28000" {
		t.Errorf("TLS on both sides, channel binding: %v, want PostgreSQL's 28000", err)
	}
	c = connect(t, secure+"&channel_binding=disable")
	if err := c.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Errorf("TLS on both sides, channel_binding=disable: upstream ssl %v, %v", ssl, err)
	}
}

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/clitest"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/testcert"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/rpc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// run runs the command line with args and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	return clitest.Run(t, newApp(), append([]string{"vecside", "--log-level", "error"}, args...)...)
}

// TestCheckListsDeclaredIndexes: check with no --index lists what serve
// would serve of what the database declares, checks each, and says why
// a declaration is not served.
func TestCheckListsDeclaredIndexes(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(ctx, pgtest.StandInPgvectorIndexes+`CREATE TABLE items (id int PRIMARY KEY, embedding real[]);
		CREATE INDEX items_embedding_idx ON items USING hnsw (embedding vector_cosine_ops);
		CREATE INDEX items_l1 ON items USING hnsw (embedding vector_l1_ops)`); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "check", "--source", dsn)
	if err != nil || !strings.Contains(out, `serves items_embedding_idx="public"."items"("embedding") key="id" metric=cosine kind=hnsw`) ||
		!strings.Contains(out, "ok    index items_embedding_idx") ||
		!regexp.MustCompile(`warn\s+declared pgvector index public.items_l1\s+not served: operator class vector_l1_ops`).MatchString(out) {
		t.Fatalf("check with no --index: %v\n%s", err, out)
	}
	if out, err := run(t, "check", "--source", dsn, "--discover", "off"); err != nil || strings.Contains(out, "declared") {
		t.Errorf("check --discover off: %v\n%s", err, out)
	}
}

func TestSearchCheckTeardown(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(ctx, pgtest.StandInVector+`CREATE TABLE bad (id int PRIMARY KEY, e vector(3));
		CREATE TABLE t (id int PRIMARY KEY, v real[]);
		INSERT INTO t VALUES (1, '{1,0}'), (2, '{0,1}'), (3, '{0.9,0.1}'), (4, NULL);
		CREATE TABLE nokey (v real[])`); err != nil {
		t.Fatal(err)
	}
	index := "t_v=t(v) key=id metric=l2"

	out, err := run(t, "check", "--source", dsn, "--index", index)
	if err != nil || !strings.Contains(out, "ok    index t_v") {
		t.Fatalf("check of a good table: %v\n%s", err, out)
	}
	out, err = run(t, "check", "--source", dsn, "--index", "n=nokey(v) key=id metric=l2")
	if err == nil || !strings.Contains(out, "FAIL  index n") || !strings.Contains(out, "fix:") {
		t.Fatalf("check of a table without key: %v\n%s", err, out)
	}

	sc, err := sidecar.Start(ctx, sidecar.Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust",
		Indexes: []string{index, "bad_e=bad(e) key=id metric=l2 dims=4"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := sc.Indexer.Get("t_v")
	if err := sidecar.WaitReady(ctx, e, time.Minute); err != nil {
		t.Fatal(err)
	}
	bad, _ := sc.Indexer.Get("bad_e")
	if err := sidecar.WaitReady(ctx, bad, time.Minute); err == nil {
		t.Fatal("bad_e became ready; want it in error")
	}
	addr := sc.Addr.String()
	out, err = run(t, "status", "--addr", addr)
	if err == nil || !strings.Contains(err.Error(), "1 index(es) in error") ||
		!regexp.MustCompile(`(?m)^t_v\s+public\.t\(v\)\s+flat\s+ready\s+3\s+1\s+`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^bad_e\s+public\.bad\(e\)\s+\S+\s+error\s+.*\n\s+error: .*vector\(3\)`).MatchString(out) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = run(t, "search", "--addr", addr, "--index", "t_v", "--k", "2", "[1,0]")
	if err != nil || !regexp.MustCompile(`(?s)id\s+distance\n1\s+0\n3\s+0\.14`).MatchString(out) {
		t.Fatalf("search: %v\n%s", err, out)
	}
	out, err = run(t, "search", "--addr", addr, "--index", "t_v", "--k", "1", "--source", dsn, "{0,1}")
	if err != nil || !regexp.MustCompile(`(?s)id\s+distance\n2\s+0\n$`).MatchString(out) {
		t.Fatalf("search with --source: %v\n%s", err, out)
	}
	if _, err := run(t, "search", "--addr", addr, "--index", "nope", "[1,0]"); err == nil || !strings.Contains(err.Error(), "42704") {
		t.Fatalf("search of an unknown index: %v", err)
	}
	if err := sc.Stop(); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "teardown", "--source", dsn)
	if err != nil || !strings.Contains(out, "dropped replication slot vecside") || !strings.Contains(out, "dropped publication vecside") {
		t.Fatalf("teardown: %v\n%s", err, out)
	}
}

// TestLimitFlags: the client limit flags reach rpc.Limits, sizes in
// their units, and 0 means "never" or "none" where rpc's zero would mean
// the default.
func TestLimitFlags(t *testing.T) {
	var got rpc.Limits
	app := &cli.App{Flags: limitFlags, Action: func(c *cli.Context) (err error) {
		got, err = rpcLimits(c)
		return err
	}}
	if err := app.Run([]string{"x", "--max-connections", "7", "--reserved-connections", "0", "--idle-timeout", "0",
		"--max-reply-buffer", "64KiB", "--max-prepared-bytes", "1MiB", "--auth-timeout", "3s"}); err != nil {
		t.Fatal(err)
	}
	want := rpc.DefaultLimits
	want.MaxConnections, want.ReservedConnections, want.IdleTimeout = 7, -1, -1
	want.MaxReplyBuffer, want.MaxPreparedBytes, want.AuthTimeout = 64<<10, 1<<20, 3*time.Second
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if err := app.Run([]string{"x", "--max-reply-buffer", "lots"}); err == nil {
		t.Error("--max-reply-buffer lots accepted")
	}
}

// TestPasswdAndUsersFile: a users file may hold lines from vecside passwd
// and verifiers PostgreSQL made itself (pg_authid.rolpassword): the server
// logs both users in, and refuses a wrong password.
func TestPasswdAndUsersFile(t *testing.T) {
	ctx := context.Background()
	stdin, err := os.CreateTemp(t.TempDir(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	stdin.WriteString("alice's secret\n")
	stdin.Seek(0, 0)
	old := os.Stdin
	os.Stdin = stdin
	out, err := run(t, "passwd", "alice")
	os.Stdin = old
	if err != nil || !strings.HasPrefix(out, `"alice" "SCRAM-SHA-256$4096:`) {
		t.Fatalf("passwd: %v %q", err, out)
	}
	db := pgtest.Connect(t, pgtest.Shared(t).NewDatabase(t))
	if _, err := db.Exec(ctx, `SET password_encryption = 'scram-sha-256';
		CREATE ROLE passwd_bob PASSWORD 'bob''s secret'`); err != nil {
		t.Fatal(err)
	}
	var verifier string
	if err := db.QueryRow(ctx, `SELECT rolpassword FROM pg_authid WHERE rolname = 'passwd_bob'`).Scan(&verifier); err != nil {
		t.Fatal(err)
	}
	defer db.Exec(ctx, "DROP ROLE passwd_bob")
	file := filepath.Join(t.TempDir(), "users")
	os.WriteFile(file, []byte(out+`"bob" "`+verifier+"\"\n"), 0o600)
	users, err := rpc.LoadUsers(file)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpc.NewServer(rpc.Config{Catalog: indexer.New(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go srv.Serve(sctx, ln)
	for user, password := range map[string]string{"alice": "alice's secret", "bob": "bob's secret", "carol": "x"} {
		dsn := fmt.Sprintf("postgres://%s:%s@%s/db?sslmode=disable", user, url.PathEscape(password), ln.Addr())
		conn, err := pgx.Connect(ctx, dsn)
		if (err == nil) != (user != "carol") {
			t.Errorf("%s: %v", user, err)
		}
		if err == nil {
			conn.Close(ctx)
		}
	}
}

// TestServeAuthFlags: serve asks for passwords unless told otherwise, and
// says how to give it users.
func TestServeAuthFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--auth scram-sha-256 needs --users FILE"},
		{[]string{"--auth", "md5"}, "md5 and plain passwords are not offered"},
		{[]string{"--auth", "trust", "--tls-required"}, "--tls-required needs --tls-cert"},
		{[]string{"--auth", "trust", "--tls-cert", "x.crt"}, "--tls-cert and --tls-key go together"},
	} {
		args := append([]string{"serve", "--source", "postgres://nowhere", "--index", "a=t(v) key=id"}, c.args...)
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestSQLCommands: sql print writes the script with the sidecar and the
// indexes named by --index; install and uninstall run it on a database.
func TestSQLCommands(t *testing.T) {
	t.Setenv("VECSIDE_PASSWORD", "pw")
	args := []string{"--sidecar", "10.1.2.3:6433", "--sidecar-user", "helper", "--index", "t_v=t(v) key=id metric=cosine", "--allow-rls", "t_v"}
	out, err := run(t, append([]string{"sql", "print"}, args...)...)
	if err != nil || !strings.Contains(out, "SELECT vecside.set_sidecar('10.1.2.3', 6433, 'helper', 'pw', 'prefer', NULL);") ||
		!strings.Contains(out, `SELECT vecside.register_index('t_v', '"public"."t"'::regclass, 'id', 'v', 'cosine', true, true);`) {
		t.Fatalf("sql print: %v\n%s", err, out)
	}
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	db.Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY, v real[])")
	if out, err := run(t, append([]string{"sql", "install", "--source", dsn}, args...)...); err != nil {
		t.Fatalf("sql install: %v\n%s", err, out)
	}
	if out, err := run(t, "sql", "uninstall", "--source", dsn); err != nil || !strings.Contains(out, "removed schema vecside\n") {
		t.Fatalf("sql uninstall: %v\n%s", err, out)
	}
	if out, err := run(t, "sql", "uninstall", "--source", dsn); err != nil || !strings.Contains(out, "nothing to remove") {
		t.Fatalf("sql uninstall again: %v\n%s", err, out)
	}
	// A where= holding commas is one index, as a flag and as one of the
	// newline-separated items of VECSIDE_INDEX.
	sharded := "t_odd=t(v) key=id metric=l2 where='id % 2 IN (1, -1)'"
	registered := `SELECT vecside.register_index('t_odd', '"public"."t"'::regclass, 'id', 'v', 'l2', false, true);`
	if out, err := run(t, "sql", "print", "--index", sharded); err != nil || !strings.Contains(out, registered) {
		t.Errorf("sql print --index with commas: %v\n%s", err, out)
	}
	t.Setenv("VECSIDE_INDEX", "t_v=t(v) key=id metric=cosine\n"+sharded)
	if out, err := run(t, "sql", "print"); err != nil || !strings.Contains(out, registered) || !strings.Contains(out, "register_index('t_v'") {
		t.Errorf("VECSIDE_INDEX of two lines, one with commas: %v\n%s", err, out)
	}
	t.Setenv("VECSIDE_INDEX", "")
	t.Setenv("VECSIDE_PASSWORD", "")
	if _, err := run(t, append([]string{"sql", "print"}, args...)...); err == nil || !strings.Contains(err.Error(), "VECSIDE_PASSWORD") {
		t.Errorf("without a password: %v", err)
	}
}

// sidecarFor starts a sidecar named name (its slot) over a new table t,
// with cfg's authentication and TLS, and waits until index t_v serves;
// it is stopped and torn down when the test ends. It returns the
// sidecar's address.
func sidecarFor(t *testing.T, name string, cfg sidecar.Config) string {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	if _, err := pgtest.Connect(t, dsn).Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v real[]);
		INSERT INTO t VALUES (1, '{1,0}'), (2, '{0,1}')`); err != nil {
		t.Fatal(err)
	}
	cfg.Source, cfg.Name, cfg.Listen = dsn, name, "127.0.0.1:0"
	cfg.Indexes = []string{"t_v=t(v) key=id metric=l2"}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	sc, err := sidecar.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := replicate.Teardown(ctx, dsn, name, sidecar.TeardownWait); err != nil {
			t.Error(err)
		}
	})
	e, _ := sc.Indexer.Get("t_v")
	if err := sidecar.WaitReady(ctx, e, time.Minute); err != nil {
		t.Fatal(err)
	}
	return sc.Addr.String()
}

// TestSQLInstallUnixSocket: with --sidecar DIR:PORT, install asks the
// sidecar for its indexes over its Unix socket, and the helpers' dblink
// logs in there with SCRAM and searches.
func TestSQLInstallUnixSocket(t *testing.T) {
	dir := socketDir(t)
	addr := sidecarFor(t, "vs_sqlunix", sidecar.Config{Auth: rpc.AuthSCRAM, Users: usersFile(t, "helper", "pw"), UnixSocketDir: dir})
	_, port, _ := net.SplitHostPort(addr)
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(context.Background(), `CREATE TABLE t (id int PRIMARY KEY, v real[]);
		INSERT INTO t VALUES (1, '{1,0}'), (2, '{0,1}')`); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VECSIDE_PASSWORD", "pw")
	if out, err := run(t, "sql", "install", "--source", dsn, "--sidecar", dir+":"+port, "--sidecar-user", "helper"); err != nil {
		t.Fatalf("sql install: %v\n%s", err, out)
	}
	var host string
	var id int
	err := db.QueryRow(context.Background(), `SELECT (SELECT option_value FROM pg_options_to_table(srvoptions) WHERE option_name = 'host')
		FROM pg_foreign_server WHERE srvname = 'vecside_sidecar'`).Scan(&host)
	if err == nil {
		err = db.QueryRow(context.Background(), "SELECT id FROM vecside.search('t_v', '{0.1,0.9}', 1, NULL::int)").Scan(&id)
	}
	if err != nil || host != dir || id != 2 {
		t.Fatalf("host %q, id %d, %v; want %s, 2", host, id, err, dir)
	}
}

// socketDir is a directory for a sidecar's Unix socket that the database
// server can reach: when the test runs as root and the server as user
// postgres, of group postgres with the setgid bit, so that the socket
// (mode 0770) is of that group too.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vecside-sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Getuid() != 0 {
		return dir
	}
	g, err := user.LookupGroup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	if err := os.Chown(dir, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// usersFile holds user with password, for a sidecar's --users.
func usersFile(t *testing.T, user, password string) *rpc.Users {
	t.Helper()
	v, err := rpc.NewVerifier(password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	users, err := rpc.ParseUsers(strings.NewReader(rpc.UserLine(user, v)))
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// TestStatusAndSearchUser: status and search log in as --user, or as
// VECSIDE_USER or PGUSER says, and as vecside without any.
func TestStatusAndSearchUser(t *testing.T) {
	addr := sidecarFor(t, "cli_user", sidecar.Config{Auth: "scram-sha-256", Users: usersFile(t, "app", "app's secret")})
	t.Setenv("PGPASSWORD", "app's secret")
	if _, err := run(t, "status", "--addr", addr); err == nil || !strings.Contains(err.Error(), `"vecside"`) {
		t.Errorf("status without a user: %v, want vecside refused", err)
	}
	if out, err := run(t, "status", "--addr", addr, "--user", "app"); err != nil || !strings.Contains(out, "t_v") {
		t.Errorf("status --user app: %v\n%s", err, out)
	}
	if out, err := run(t, "search", "--addr", addr, "--user", "app", "--index", "t_v", "--k", "1", "[1,0]"); err != nil || !regexp.MustCompile(`(?m)^1\s+0$`).MatchString(out) {
		t.Errorf("search --user app: %v\n%s", err, out)
	}
	for _, env := range []string{"VECSIDE_USER", "PGUSER"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "app")
			// A value read from the environment sticks to the flag.
			t.Cleanup(func() { userFlag.Value, userFlag.HasBeenSet = defaultUser, false })
			if out, err := run(t, "status", "--addr", addr); err != nil {
				t.Errorf("status with %s=app: %v\n%s", env, err, out)
			}
		})
	}
}

// TestSQLInstallAsksSidecarOverVerifiedTLS: without --index, sql asks the
// sidecar for its indexes with the helpers' sslmode and CA file.
func TestSQLInstallAsksSidecarOverVerifiedTLS(t *testing.T) {
	cert := testcert.New(t)
	addr := sidecarFor(t, "cli_tls", sidecar.Config{Auth: "scram-sha-256", Users: usersFile(t, "helper", "pw"),
		TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}, TLSRequired: true})
	t.Setenv("VECSIDE_PASSWORD", "pw")
	args := []string{"sql", "print", "--sidecar", addr, "--sidecar-user", "helper", "--sidecar-sslmode", "verify-full"}
	out, err := run(t, append(args, "--sidecar-sslrootcert", cert.CertFile)...)
	if err != nil || !strings.Contains(out, "register_index('t_v'") || !strings.Contains(out, "'verify-full', '"+cert.CertFile+"'") {
		t.Errorf("sql print, verifying the sidecar's certificate: %v\n%s", err, out)
	}
	// Without the CA file the certificate cannot be verified.
	if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("sql print without the CA file: %v, want a certificate error", err)
	}
}

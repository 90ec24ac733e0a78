package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway PostgreSQL.
type Cluster struct {
	Dir  string // root of everything: data/, the socket and the log
	Port int
	bin  string
	cred *syscall.Credential // nil unless running as root
	dbs  atomic.Int64
}

// DefaultBinDir is where Debian installs PostgreSQL 15's server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

func binDir() (string, error) {
	dir := os.Getenv("PG_BINDIR")
	if dir == "" {
		dir = DefaultBinDir
	}
	if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
		return "", fmt.Errorf("pgtest: no PostgreSQL server binaries in %s (install postgresql-15, e.g. apt-get install postgresql-15, or set PG_BINDIR): %w", dir, err)
	}
	return dir, nil
}

// Start initialises and starts a new cluster. Stop removes it.
func Start() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// Short: the socket path must stay under ~100 bytes.
	dir, err := os.MkdirTemp("/tmp", "vspg")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, err
		}
	}
	if c.Port, err = freePort(); err != nil {
		return nil, err
	}
	if err := c.run("initdb", "-D", c.dataDir(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
max_connections = 100
fsync = off
full_page_writes = off
shared_buffers = 128MB
logging_collector = off
`, c.Port, dir)
	if err := appendFile(filepath.Join(c.dataDir(), "postgresql.conf"), conf); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs a postgres user to run initdb as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePort is a TCP port of 127.0.0.1 that nothing listens on now, for
// a server a test starts.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

// PostmasterPID is the running server's process id, from postmaster.pid.
func (c *Cluster) PostmasterPID() (int, error) {
	raw, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	return strconv.Atoi(line)
}

func (c *Cluster) run(prog string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.Dir
	// The server's own libpq (dblink, a standby's WAL receiver) looks in
	// $HOME for certificates and passfiles: give it the cluster's
	// directory, not the test's user's, which the postgres user may not
	// read.
	cmd.Env = append(os.Environ(), "HOME="+c.Dir)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts the (stopped) server and waits until it accepts connections.
func (c *Cluster) Start() error {
	return c.run("pg_ctl", "-D", c.dataDir(), "-l", filepath.Join(c.Dir, "server.log"), "-w", "-t", "60", "start")
}

// StopServer stops the server with pg_ctl's mode: "fast" or "immediate".
func (c *Cluster) StopServer(mode string) error {
	return c.run("pg_ctl", "-D", c.dataDir(), "-w", "-t", "60", "-m", mode, "stop")
}

// Restart stops the server in mode and starts it again.
func (c *Cluster) Restart(mode string) error {
	if err := c.StopServer(mode); err != nil {
		return err
	}
	return c.Start()
}

// Stop stops the server and removes every file of the cluster.
func (c *Cluster) Stop() {
	c.StopServer("immediate")
	os.RemoveAll(c.Dir)
}

// DSN is a libpq URL for database db as the superuser.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Log returns the server's log, for failure messages.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
	return string(b)
}

// NewDatabase creates a fresh database for one test and returns its DSN.
// It is dropped when the test ends, together with any replication slot
// left in it.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", c.dbs.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { c.dropDatabase(name) })
	return c.DSN(name)
}

// Connect opens a connection to dsn for one test, closed when it ends.
func Connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func (c *Cluster) dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	// A walsender outlives its client for a moment; its slot must go
	// with the database, or the next test's sidecar of the same name
	// finds a slot of another database (which it refuses to touch).
	for ctx.Err() == nil {
		conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active`, name)
		conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, name).Scan(&left); err == nil && left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

var shared *Cluster

// Main runs a test binary's tests against one cluster started for it, and
// removes the cluster afterwards. Call it from TestMain.
func Main(m *testing.M) {
	c, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// Shared is the cluster started by Main.
func Shared(t testing.TB) *Cluster {
	if shared == nil {
		t.Fatal("pgtest: call pgtest.Main from TestMain first")
	}
	return shared
}

// NewStandby makes a hot standby of c, streaming from it, as
// pg_basebackup -R makes one, starts it on a port of its own, and stops
// and removes it when the test ends. Its databases are c's.
func (c *Cluster) NewStandby(t testing.TB) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "vssb")
	if err != nil {
		t.Fatal(err)
	}
	s := &Cluster{Dir: dir, bin: c.bin, cred: c.cred}
	t.Cleanup(s.Stop)
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	if err := s.run("pg_basebackup", "-D", s.dataDir(), "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres"); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("\nport = %d\nunix_socket_directories = '%s'\nhot_standby = on\nhot_standby_feedback = on\n", s.Port, dir)
	if err := appendFile(filepath.Join(s.dataDir(), "postgresql.auto.conf"), conf); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// appendFile appends text to an existing file.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

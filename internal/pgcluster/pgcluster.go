package pgcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Cluster is a running throwaway PostgreSQL.
type Cluster struct {
	Dir  string // root of everything: data/, the socket and the log
	Port int
	bin  string
	cred *syscall.Credential // nil unless running as root
}

// DefaultBinDir is where Debian installs PostgreSQL 15's server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

func binDir() (string, error) {
	dir := os.Getenv("PG_BINDIR")
	if dir == "" {
		dir = DefaultBinDir
	}
	if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
		return "", fmt.Errorf("pgcluster: no PostgreSQL server binaries in %s (install postgresql-15, e.g. apt-get install postgresql-15, or set PG_BINDIR): %w", dir, err)
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
	if c.Port, err = FreePort(); err != nil {
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
		return nil, fmt.Errorf("pgcluster: running as root needs a postgres user to run initdb as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// FreePort is a TCP port of 127.0.0.1 that nothing listens on now, for
// a server about to start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
		return fmt.Errorf("pgcluster: %s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
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

// StartStandby makes a hot standby of c, streaming from it, as
// pg_basebackup -R makes one, and starts it on a port of its own. Its
// databases are c's; Stop removes it.
func (c *Cluster) StartStandby() (*Cluster, error) {
	dir, err := os.MkdirTemp("/tmp", "vssb")
	if err != nil {
		return nil, err
	}
	s := &Cluster{Dir: dir, bin: c.bin, cred: c.cred}
	if err := s.startStandby(c); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (c *Cluster) startStandby(primary *Cluster) error {
	if c.cred != nil {
		if err := os.Chown(c.Dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	var err error
	if c.Port, err = FreePort(); err != nil {
		return err
	}
	if err := c.run("pg_basebackup", "-D", c.dataDir(), "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres"); err != nil {
		return err
	}
	conf := fmt.Sprintf("\nport = %d\nunix_socket_directories = '%s'\nhot_standby = on\nhot_standby_feedback = on\n", c.Port, c.Dir)
	if err := appendFile(filepath.Join(c.dataDir(), "postgresql.auto.conf"), conf); err != nil {
		return err
	}
	return c.Start()
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

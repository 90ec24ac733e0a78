package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
)

// process is the vecside serve child process of one seed. It keeps its
// address, data directory and log across restarts; an exit the test did
// not ask for is recorded as a failure.
type process struct {
	args    []string
	addr    string
	logPath string
	indexes int // --index options

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	stopping   bool
	unexpected []string // exits nobody asked for
	starts     int
}

func newProcess(dir, source, name string, indexes []string, ckpt checkpointing) (*process, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"serve", "--source", source, "--name", name, "--listen", addr, "--metrics-listen", "", "--auth", "trust",
		"--data-dir", filepath.Join(dir, "data"), "--checkpoint-interval", ckpt.interval.String(), "--checkpoint-changes", fmt.Sprint(ckpt.changes),
		"--receive-timeout", receiveTimeout.String()}
	for _, ix := range indexes {
		args = append(args, "--index", ix)
	}
	return &process{args: args, addr: addr, logPath: filepath.Join(dir, "vecside.log"), indexes: len(indexes)}, nil
}

// receiveTimeout is the sidecar's --receive-timeout: short, so that a
// partition is noticed within the run.
const receiveTimeout = 2 * time.Second

// checkpointing is a sidecar's checkpoint policy. Frequent checkpoints
// exercise restarts from recent states and idle positions; rare ones
// leave the applied LSN far ahead of the covered one, where confirming
// too much would show.
type checkpointing struct {
	interval time.Duration
	changes  int
}

var checkpointings = []checkpointing{{300 * time.Millisecond, 2000}, {time.Second, 20000}, {4 * time.Second, 1_000_000}}

// start runs a new vecside process; the previous one must have exited.
func (p *process) start() error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	fmt.Fprintf(log, "=== start %d\n", p.starts)
	cmd := exec.Command(vecsideBin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	done := make(chan struct{})
	p.cmd, p.done, p.stopping = cmd, done, false
	go func() {
		err := cmd.Wait()
		log.Close()
		p.mu.Lock()
		if !p.stopping {
			p.unexpected = append(p.unexpected, fmt.Sprintf("start %d: %v", p.starts, err))
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// signal sends sig and waits up to wait for the process to exit.
func (p *process) signal(sig syscall.Signal, wait time.Duration) (*os.ProcessState, error) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.stopping = true
	p.mu.Unlock()
	if cmd == nil {
		return nil, errors.New("no vecside process")
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
		return cmd.ProcessState, nil
	case <-time.After(wait):
		cmd.Process.Kill()
		<-done
		return cmd.ProcessState, fmt.Errorf("vecside did not exit within %s of %v", wait, sig)
	}
}

// kill is the SIGKILL fault: the process dies without a final checkpoint.
func (p *process) kill() error {
	_, err := p.signal(syscall.SIGKILL, 30*time.Second)
	return err
}

// stop is a clean shutdown (SIGTERM), which writes a final checkpoint.
func (p *process) stop() error {
	st, err := p.signal(syscall.SIGTERM, 60*time.Second)
	if err == nil && !st.Success() {
		err = fmt.Errorf("vecside exited with %v after SIGTERM", st)
	}
	return err
}

// pid is the running process's id, 0 if none was started.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *process) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// unexpectedExits lists the exits nobody asked for.
func (p *process) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unexpected...)
}

// launch starts a sidecar for t and kills it when t ends. If t failed, it
// logs hint, the exits nobody asked for and the tail of the process's
// log, which it keeps as $TMPDIR/vecside-chaos-NAME.log.
func launch(t *testing.T, dir, source, slot string, indexes []string, ckpt checkpointing, name, hint string) *process {
	t.Helper()
	proc, err := newProcess(dir, source, slot, indexes, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.kill()
		if t.Failed() {
			t.Logf("%svecside exits nobody asked for: %q; its log (%s), last lines:\n%s",
				hint, proc.unexpectedExits(), proc.keepLog(name), proc.logTail(60))
		}
	})
	return proc
}

// keepLog copies the process's log out of the test's directory, which
// the test removes, and returns where it went.
func (p *process) keepLog(name string) string {
	b, _ := os.ReadFile(p.logPath)
	path := filepath.Join(os.TempDir(), "vecside-chaos-"+name+".log")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return p.logPath
	}
	return path
}

// logTail is the end of the process's log, for failure messages.
func (p *process) logTail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// indexStatus is one row of vecside_status().
type indexStatus struct {
	name             string
	rows, skipped    int64
	state            string
	applied, covered indexer.LSN
}

// status asks the running sidecar for vecside_status(), on a fresh
// connection (the process may have been restarted since the last call).
func (p *process) status(ctx context.Context) ([]indexStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://vecside@"+p.addr+"/vecside?sslmode=disable&connect_timeout=5")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT index_name, rows, skipped_rows, state, applied_lsn, covered_lsn FROM vecside_status()`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []indexStatus
	for rows.Next() {
		var s indexStatus
		var applied, covered string
		if err := rows.Scan(&s.name, &s.rows, &s.skipped, &s.state, &applied, &covered); err != nil {
			return nil, err
		}
		if s.applied, err = indexer.ParseLSN(applied); err != nil {
			return nil, err
		}
		if s.covered, err = indexer.ParseLSN(covered); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/rpc"
)

// sidecarProcess is a vecside serve child process that the bench measures
// from outside, so that its memory is its own and not the data set's.
type sidecarProcess struct {
	cmd        *exec.Cmd
	addr       string
	url        string // how the bench logs in
	dir        string
	rows       int
	indexBytes int64
	rss, peak  int64 // resident bytes once ready, and the most ever (VmHWM)
	proxy      *childProxy
	exited     chan struct{} // closed when the process has ended
	waitErr    error         // then, how
}

// hasServeProxy reports whether the vecside command at path has serve
// --proxy: a build without cgo has no proxy.
func hasServeProxy(path string) bool {
	out, _ := exec.Command(path, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), "--proxy-listen")
}

// childProxy is where a child's serve --proxy listens, and its /metrics.
type childProxy struct{ listen, metrics string }

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// vecsideCommand finds the vecside command that --process runs: the one
// named, else vecside in this command's directory (go install puts both
// there), else vecside on PATH.
func vecsideCommand(named string) (string, error) {
	if named != "" {
		path, err := exec.LookPath(named)
		if err != nil {
			return "", fmt.Errorf("--vecside: %w", err)
		}
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		if path, err := exec.LookPath(filepath.Join(filepath.Dir(exe), "vecside")); err == nil {
			return path, nil
		}
	}
	path, err := exec.LookPath("vecside")
	if err != nil {
		return "", fmt.Errorf("--process runs vecside serve, and no vecside command is in this command's directory or on PATH: go install ./cmd/vecside, or name one with --vecside: %w", err)
	}
	return path, nil
}

// startProcess starts vecside serve for one index over the bench table and
// waits until the index is ready; with --proxy too where the serve-proxy
// path is measured.
func (b *bench) startProcess(ctx context.Context, name, def string) (*sidecarProcess, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var px *childProxy
	if b.p.paths[pathServeProxy] {
		px = &childProxy{}
		if px.listen, err = freeAddr(); err == nil {
			px.metrics, err = freeAddr()
		}
		if err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "vecside-bench-")
	if err != nil {
		return nil, err
	}
	spec := fmt.Sprintf("%s=public.%s(embedding) key=id metric=%s %s", name, benchTable, b.p.metric, def)
	if _, err := replicate.Teardown(ctx, b.dsn, "vecside_"+name, sidecar.TeardownWait); err != nil {
		return nil, err
	}
	b.say("%s: starting vecside serve for %s", def, spec)
	p := &sidecarProcess{addr: addr, dir: dir, url: b.sidecarURL(addr), proxy: px}
	users := filepath.Join(dir, "users")
	v, err := rpc.NewVerifier(b.sidecarPassword, rpc.DefaultScramIterations)
	if err == nil {
		err = os.WriteFile(users, []byte(rpc.UserLine(sidecarUser, v)+"\n"), 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"--log-level", "warn", "serve", "--source", b.dsn, "--name", "vecside_" + name,
		"--listen", addr, "--metrics-listen", "", "--data-dir", dir, "--auth", rpc.AuthSCRAM, "--users", users, "--index", spec}
	if px != nil {
		args = append(args, "--proxy", "--proxy-listen", px.listen, "--proxy-metrics-listen", px.metrics)
	}
	p.cmd = exec.CommandContext(ctx, b.p.vecside, args...)
	p.cmd.Stderr = os.Stderr
	if err := startOn(p.cmd, b.p.sidecarCPUs); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitReady(ctx, name, time.Hour); err != nil {
		p.stop()
		return nil, err
	}
	if p.rss, p.peak, err = memory(p.cmd.Process.Pid); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitReady polls vecside_status() until the index is ready.
func (p *sidecarProcess) waitReady(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-p.exited:
			return fmt.Errorf("vecside serve ended before index %s was ready: %v", name, p.waitErr)
		default:
		}
		conn, err := pgx.Connect(ctx, p.url)
		if err != nil {
			continue // not listening yet
		}
		var index, state string
		var failure *string
		err = conn.QueryRow(ctx, "SELECT index_name, state, error, rows, index_bytes FROM vecside_status()").Scan(&index, &state, &failure, &p.rows, &p.indexBytes)
		conn.Close(ctx)
		if err == nil && index != name {
			err = fmt.Errorf("the sidecar serves index %s, not %s", index, name)
		}
		switch {
		case err != nil:
			return err
		case state == "error":
			return fmt.Errorf("index %s: %s", name, *failure)
		case state == "ready":
			return nil
		}
	}
	return fmt.Errorf("index %s not ready after %s", name, timeout)
}

// stop ends the process and removes its checkpoints.
func (p *sidecarProcess) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.exited
	}
	os.RemoveAll(p.dir)
}

// memory reads a process's resident set size and its peak from
// /proc/PID/status.
func memory(pid int) (rss, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		field, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (field != "VmRSS" && field != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q", field, value)
		}
		if field == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak, sc.Err()
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// tierBench runs a small bench in a throwaway server with the extra
// flags, and returns its report's path and Markdown.
func tierBench(t *testing.T, extra ...string) (string, string, error) {
	out := filepath.Join(t.TempDir(), "r.json")
	md, err := run(t, append([]string{"--rows", "2000", "--dims", "8", "--queries", "20", "--metric", "l2",
		"--index", "kind=flat", "--oversample", "1", "--pgvector=false", "--paths", "sidecar,heapfetch",
		"--clients", "2", "--measure", "20", "--json", out}, extra...)...)
	return out, md, err
}

// cpusAllowed is a process's or thread's Cpus_allowed_list.
func cpusAllowed(t *testing.T, path string) string {
	t.Helper()
	v := procField(filepath.Join(path, "status"), "Cpus_allowed_list")
	if v == "unknown" {
		t.Errorf("%s/status: no Cpus_allowed_list", path)
	}
	return v
}

// backendPID opens a connection to dsn, forking a backend, and returns
// the backend's PID and a function that closes it.
func backendPID(t *testing.T, dsn string) (int, func()) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid, func() { conn.Close(ctx) }
}

// TestBenchTierCPUs: with --pg-cpus 0 --bench-cpus 1, the postmaster, the
// children it had and a backend it forks later run on CPU 0 only, every
// thread of the bench on CPU 1 only, the report's header says so, and the
// bench's process is back on its CPUs afterwards.
func TestBenchTierCPUs(t *testing.T) {
	if online := procField("/proc/self/status", "Cpus_allowed_list"); online == "0" {
		t.Skipf("this process may run on CPU 0 only (Cpus_allowed_list %s): the test needs CPUs 0 and 1", online)
	}
	before := cpusAllowed(t, "/proc/self")
	var placed bool
	benchTierHook = func(postmaster int, dsn string) {
		placed = true
		backend, done := backendPID(t, dsn)
		defer done()
		procs := []int{backend}
		for _, pid := range (&bench{postmaster: postmaster}).postgresProcesses() {
			procs = append(procs, pid)
		}
		if len(procs) < 4 { // the backend, the postmaster, its checkpointer, ...
			t.Errorf("Postgres processes %v: want the postmaster's children too", procs)
		}
		for _, pid := range procs {
			if got := cpusAllowed(t, fmt.Sprintf("/proc/%d", pid)); got != "0" {
				t.Errorf("Postgres process %d (postmaster %d, backend %d): Cpus_allowed_list %s, want 0", pid, postmaster, backend, got)
			}
		}
		tasks, _ := filepath.Glob("/proc/self/task/*")
		for _, task := range tasks {
			if got := cpusAllowed(t, task); got != "1" {
				t.Errorf("bench thread %s: Cpus_allowed_list %s, want 1", task, got)
			}
		}
	}
	defer func() { benchTierHook = nil }()
	out, md, err := tierBench(t, "--pg-cpus", "0", "--bench-cpus", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	if !placed {
		t.Error("the bench never placed the server")
	}
	if d := readReport(t, out).Header.Deployment; d == nil || d.PostgresCPUs != "0" || d.BenchCPUs != "1" || d.PostgresMemoryLimit != 0 {
		t.Errorf("deployment %+v", d)
	}
	if !strings.Contains(md, "Deployment: Postgres on CPUs 0; the bench (clients, sidecars, proxy) on CPUs 1.") {
		t.Errorf("Markdown without the deployment:\n%s", md)
	}
	if got := cpusAllowed(t, "/proc/self"); got != before {
		t.Errorf("after the bench: Cpus_allowed_list %s, want %s as before", got, before)
	}
}

// TestBenchTierMemory: with --pg-memory 512MB the postmaster and a backend
// are in a memory cgroup of that limit below the test's own, shared_buffers
// is a quarter of it, the report has the limit and the peak, and the
// cgroup is gone afterwards.
func TestBenchTierMemory(t *testing.T) {
	var cgroup string // the postmaster's, from /proc
	benchTierHook = func(postmaster int, dsn string) {
		backend, done := backendPID(t, dsn)
		defer done()
		for _, pid := range []int{postmaster, backend} {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			if err != nil {
				t.Fatal(err)
			}
			got := memoryCgroup(string(raw))
			if want := "/vecside-bench-pg-" + strconv.Itoa(os.Getpid()); !strings.HasSuffix(got, want) {
				t.Errorf("process %d (postmaster %d) in cgroup %q, want one ending %s\n%s", pid, postmaster, got, want, raw)
			}
			cgroup = got
		}
		limit := ""
		for _, f := range []string{"/sys/fs/cgroup/memory%s/memory.limit_in_bytes", "/sys/fs/cgroup/unified%s/memory.max", "/sys/fs/cgroup%s/memory.max"} {
			if raw, err := os.ReadFile(fmt.Sprintf(f, cgroup)); err == nil {
				limit = strings.TrimSpace(string(raw))
				break
			}
		}
		if limit != strconv.Itoa(512<<20) {
			t.Errorf("cgroup %s: limit %q, want %d", cgroup, limit, 512<<20)
		}
	}
	defer func() { benchTierHook = nil }()
	out, md, err := tierBench(t, "--pg-memory", "512MB")
	if err != nil && strings.Contains(err.Error(), "no writable memory cgroup") && os.Geteuid() != 0 {
		t.Skipf("this machine gives a non-root user no memory cgroup: %v", err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out)
	d := r.Header.Deployment
	if d == nil || d.PostgresMemoryLimit != 512<<20 || d.PostgresMemoryPeak <= 0 || d.PostgresMemoryPeak > 512<<20 || d.PostgresCPUs != "" {
		t.Fatalf("deployment %+v", d)
	}
	dir := strings.TrimPrefix(strings.TrimPrefix(d.PostgresCgroup, "v1 "), "v2 ")
	if cgroup == "" || !strings.HasSuffix(dir, cgroup) {
		t.Errorf("report's cgroup %q, the postmaster's %q", d.PostgresCgroup, cgroup)
	}
	if r.Header.Machine.SharedBuffers != "128MB" {
		t.Errorf("shared_buffers %s, want 128MB, a quarter of 512MB", r.Header.Machine.SharedBuffers)
	}
	if !strings.Contains(md, "Postgres's memory limited to 512 MiB (cgroup "+d.PostgresCgroup) {
		t.Errorf("Markdown without the limit:\n%s", md)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind: %v", dir, err)
	}
}

// memoryCgroup is the path of the memory cgroup in a /proc/PID/cgroup:
// v1's memory hierarchy where there is one, else v2's.
func memoryCgroup(procCgroup string) string {
	v2 := ""
	for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) < 3:
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			return f[2]
		case f[0] == "0":
			v2 = f[2]
		}
	}
	return v2
}

// TestBenchTierFlags: the tier's flags refuse what cannot work, and their
// values read as Linux and Postgres write them.
func TestBenchTierFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "postgres://nowhere/x", "--pg-cpus", "0"}, "with --source"},
		{[]string{"--source", "postgres://nowhere/x", "--pg-memory", "1GB"}, "with --source"},
		{[]string{"--pg-cpus", "0-1,4096"}, "want a CPU list"},
		{[]string{"--bench-cpus", "1023"}, "is not online"},
		{[]string{"--pg-cpus", "x"}, "--pg-cpus"},
		{[]string{"--pg-memory", "lots"}, "--pg-memory"},
		{[]string{"--pg-memory", "512MB", "--shared-buffers", "1GB"}, "does not fit"},
		{[]string{"--sidecar-cpus", "0"}, "add --process"},
	} {
		if _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	for in, want := range map[string][]int{"0": {0}, "0-2,5": {0, 1, 2, 5}, " 1 , 3-3": {1, 3}} {
		if got, err := cpuListCPUs(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("cpuListCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]int64{"4GB": 4 << 30, "512MB": 512 << 20, "64kB": 64 << 10, "1GiB": 1 << 30} {
		if got, err := pgSize(in); err != nil || got != want {
			t.Errorf("pgSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// TestStartOn: a child started for --sidecar-cpus runs on those CPUs, and
// the thread that started it is back on its own.
func TestStartOn(t *testing.T) {
	before := cpusAllowed(t, "/proc/self")
	for _, cpus := range []string{"0", before} {
		l, err := parseCPUList(cpus)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status")
		var out strings.Builder
		cmd.Stdout = &out
		if err := startOn(cmd, &l); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:")); got != cpus {
			t.Errorf("started on %s: the child's Cpus_allowed_list %q", cpus, got)
		}
	}
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, task := range tasks {
		if got := cpusAllowed(t, task); got != before {
			t.Errorf("thread %s: Cpus_allowed_list %s, want %s as before", task, got, before)
		}
	}
}

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/internal/bytesize"
	"golang.org/x/sys/unix"
)

// The deployment tier: where the throwaway Postgres runs (--pg-cpus,
// --pg-memory), where the bench itself runs (--bench-cpus) and where its
// --process sidecars run (--sidecar-cpus), so that Postgres can be
// measured as the bottleneck it is on a primary, not as one more process
// sharing every core with the clients and the sidecars.
//
// Pinning is sched_setaffinity on every thread of a process: a process
// forked later (a backend, a --process sidecar, pgbench) and a thread
// started later inherit the mask of the thread that made them, so
// pinning the postmaster pins every backend, and pinning the bench pins
// what it starts. golang.org/x/sys/unix is already a dependency, so it
// needs no cpuset cgroup (root only, and a second hierarchy to clean up)
// and no taskset binary, and works unprivileged on one's own processes. The memory limit needs a cgroup: v2's
// memory.max where the unified hierarchy offers the memory controller,
// else v1's memory.limit_in_bytes, in a group made below the bench's own
// (so that any limit placed on the bench still holds) and removed at the
// end.

// cpuList is a parsed Linux CPU list such as "0-1,3".
type cpuList struct {
	text string
	set  unix.CPUSet
}

// parseCPUList reads a CPU list; every CPU must be online.
func parseCPUList(s string) (cpuList, error) {
	cpus, err := cpuListCPUs(s)
	if err != nil {
		return cpuList{}, err
	}
	online := "/sys/devices/system/cpu/online"
	raw, err := os.ReadFile(online)
	if err != nil {
		return cpuList{}, err
	}
	have, err := cpuListCPUs(strings.TrimSpace(string(raw)))
	if err != nil {
		return cpuList{}, fmt.Errorf("%s: %w", online, err)
	}
	l := cpuList{text: s}
	for _, c := range cpus {
		if !slices.Contains(have, c) {
			return cpuList{}, fmt.Errorf("%q: CPU %d is not online (%s: %s)", s, c, online, strings.TrimSpace(string(raw)))
		}
		l.set.Set(c)
	}
	return l, nil
}

// cpuListCPUs reads the CPUs of a list of numbers and ranges.
func cpuListCPUs(s string) ([]int, error) {
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.Atoi(lo)
		z := a
		if err == nil && isRange {
			z, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || z < a || z >= 1024 {
			return nil, fmt.Errorf("%q: want a CPU list such as 0, 0-1 or 0-1,3", s)
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// pinThreads sets the CPUs of every thread of process pid, again while
// new threads appear (one that an unpinned thread started meanwhile).
func pinThreads(pid int, set *unix.CPUSet) error {
	pinned := map[int]bool{}
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sched_setaffinity of thread %d of process %d: %w", tid, pid, err)
			}
			pinned[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}

// startOn starts cmd on the CPUs of list, or where the bench runs if
// list is nil: the child inherits the mask of the thread that forks it,
// so this goroutine holds its thread and sets that thread's mask for the
// fork, race-free, as no thread of the child exists before it.
func startOn(cmd *exec.Cmd, list *cpuList) error {
	if list == nil {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, &list.set); err != nil {
		return fmt.Errorf("sched_setaffinity: %w", err)
	}
	defer unix.SchedSetaffinity(0, &was)
	return cmd.Start()
}

// postgresProcesses lists the throwaway server's processes: the
// postmaster first, then its children.
func (b *bench) postgresProcesses() []int {
	pids := []int{b.postmaster}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return pids
	}
	parent := strconv.Itoa(b.postmaster)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == b.postmaster {
			continue
		}
		if stat, err := procStat(pid); err == nil && stat[1] == parent {
			pids = append(pids, pid)
		}
	}
	return pids
}

// tier is what the bench did to where processes run, to be undone.
type tier struct {
	benchWas *unix.CPUSet // the bench's CPUs before --bench-cpus
	cg       *memCgroup
}

// placeBench pins the bench's own process to --bench-cpus.
func (b *bench) placeBench() error {
	b.noteSidecarCPUs()
	if b.p.benchCPUs == nil {
		return nil
	}
	was := new(unix.CPUSet)
	if err := unix.SchedGetaffinity(0, was); err != nil {
		return err
	}
	if err := pinThreads(os.Getpid(), &b.p.benchCPUs.set); err != nil {
		return fmt.Errorf("--bench-cpus: %w", err)
	}
	b.tier.benchWas = was
	b.deployment().BenchCPUs = b.p.benchCPUs.text
	b.say("the bench (clients, sidecars, proxy) runs on CPUs %s", b.p.benchCPUs.text)
	return nil
}

// noteSidecarCPUs records --sidecar-cpus, which startProcess applies.
func (b *bench) noteSidecarCPUs() {
	if b.p.sidecarCPUs != nil {
		b.deployment().SidecarCPUs = b.p.sidecarCPUs.text
		b.say("each vecside serve child runs on CPUs %s", b.p.sidecarCPUs.text)
	}
}

// makePGCgroup makes the memory cgroup for --pg-memory, before the server
// starts, so that it is removed after the server stops.
func (b *bench) makePGCgroup() error {
	if b.p.pgMemory == 0 {
		return nil
	}
	cg, err := newMemCgroup(fmt.Sprintf("vecside-bench-pg-%d", os.Getpid()), b.p.pgMemory)
	if err != nil {
		return fmt.Errorf("--pg-memory: %w", err)
	}
	b.tier.cg = cg
	t := b.deployment()
	t.PostgresMemoryLimit, t.PostgresCgroup = b.p.pgMemory, cg.describe()
	b.say("Postgres runs in the memory cgroup %s", t.PostgresCgroup)
	return nil
}

// placePostgres moves the running throwaway server into its memory cgroup
// and pins it to --pg-cpus: the postmaster first, so that what it forks
// from then on follows, then the children it already has.
func (b *bench) placePostgres() error {
	for _, pid := range b.postgresProcesses() {
		if b.tier.cg != nil {
			if err := b.tier.cg.add(pid); err != nil && pid == b.postmaster {
				return fmt.Errorf("--pg-memory: %w", err)
			}
		}
		if b.p.pgCPUs != nil {
			if err := pinThreads(pid, &b.p.pgCPUs.set); err != nil && pid == b.postmaster {
				return fmt.Errorf("--pg-cpus: %w", err)
			}
		}
	}
	if b.p.pgCPUs != nil {
		b.deployment().PostgresCPUs = b.p.pgCPUs.text
		b.say("Postgres runs on CPUs %s", b.p.pgCPUs.text)
	}
	if benchTierHook != nil {
		benchTierHook(b.postmaster, b.dsn)
	}
	return nil
}

// benchTierHook, when set (by tests), sees the server once it is placed.
var benchTierHook func(postmaster int, dsn string)

// recordPeak notes the server's peak memory in the report.
func (b *bench) recordPeak() {
	if b.tier.cg == nil {
		return
	}
	if peak, err := b.tier.cg.peak(); err == nil {
		b.deployment().PostgresMemoryPeak = peak
	} else {
		b.say("Postgres's peak memory: %v", err)
	}
}

// undoTier puts the bench back on its CPUs and removes the cgroup (the
// server has stopped by then).
func (b *bench) undoTier() {
	if was := b.tier.benchWas; was != nil {
		if err := pinThreads(os.Getpid(), was); err != nil {
			b.say("putting the bench back on its CPUs: %v", err)
		}
	}
	if cg := b.tier.cg; cg != nil {
		if err := cg.remove(); err != nil {
			b.say("%v", err)
		}
	}
}

// memCgroup is a memory cgroup of either version.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes cgroup name with a memory limit of limit bytes
// below the bench's own: in cgroup v2 where its unified hierarchy offers
// the memory controller, else in v1's memory hierarchy.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	var why []string
	for _, v2 := range []bool{true, false} {
		parent, err := ownCgroup(v2)
		if err == nil {
			cg := &memCgroup{dir: filepath.Join(parent, name), v2: v2}
			if err = cg.make(parent, limit); err == nil {
				return cg, nil
			}
		}
		why = append(why, err.Error())
	}
	return nil, fmt.Errorf("no writable memory cgroup (%s): run as root, or delegate a cgroup v2 subtree with the memory controller (its parent's cgroup.subtree_control) to this user",
		strings.Join(why, "; "))
}

// ownCgroup is the directory of this process's cgroup in v2's unified
// hierarchy or in v1's memory hierarchy, from /proc/self/mountinfo and
// /proc/self/cgroup.
func ownCgroup(v2 bool) (string, error) {
	kind := map[bool]string{true: "cgroup v2", false: "cgroup v1 memory"}[v2]
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	mount := ""
	for _, line := range strings.Split(string(raw), "\n") {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue
		}
		if (v2 && g[0] == "cgroup2") || (!v2 && g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "memory")) {
			mount = f[4]
			break
		}
	}
	if mount == "" {
		return "", fmt.Errorf("%s: not mounted", kind)
	}
	raw, err = os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		// hierarchy-ID:controllers:path
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && ((v2 && f[0] == "0" && f[1] == "") || (!v2 && slices.Contains(strings.Split(f[1], ","), "memory"))) {
			return filepath.Join(mount, f[2]), nil
		}
	}
	return "", fmt.Errorf("%s: this process is in none (/proc/self/cgroup)", kind)
}

// make creates the group below parent and sets its limit.
func (cg *memCgroup) make(parent string, limit int64) error {
	if cg.v2 {
		raw, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("cgroup v2: %w", err)
		}
		if !slices.Contains(strings.Fields(string(raw)), "memory") {
			return fmt.Errorf("cgroup v2: %s offers no memory controller (cgroup.controllers: %q)", parent, strings.TrimSpace(string(raw)))
		}
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			return fmt.Errorf("cgroup v2: enabling memory in %s/cgroup.subtree_control: %w", parent, err)
		}
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", map[bool]string{true: "cgroup v2", false: "cgroup v1 memory"}[cg.v2], err)
	}
	file := map[bool]string{true: "memory.max", false: "memory.limit_in_bytes"}[cg.v2]
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		cg.remove()
		return fmt.Errorf("%s/%s: %w", cg.dir, file, err)
	}
	// No swapping past the limit either, where the kernel accounts swap.
	file, value := "memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10)
	if cg.v2 {
		file, value = "memory.swap.max", "0"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(value), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		cg.remove()
		return fmt.Errorf("%s/%s: %w", cg.dir, file, err)
	}
	if !cg.v2 {
		// What a process has already charged moves in with it, where the
		// kernel still can (v2 never moves charges): the server is moved
		// in after it starts.
		os.WriteFile(filepath.Join(cg.dir, "memory.move_charge_at_immigrate"), []byte("3"), 0)
	}
	return nil
}

// describe says which cgroup it is.
func (cg *memCgroup) describe() string {
	return map[bool]string{true: "v2 ", false: "v1 "}[cg.v2] + cg.dir
}

// add moves process pid (all its threads) into the group.
func (cg *memCgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// peak is the most memory the group has used, in bytes.
func (cg *memCgroup) peak() (int64, error) {
	file := filepath.Join(cg.dir, map[bool]string{true: "memory.peak", false: "memory.max_usage_in_bytes"}[cg.v2])
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}

// remove deletes the group, once its processes have gone.
func (cg *memCgroup) remove() error {
	var err error
	for range 50 {
		if err = unix.Rmdir(cg.dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing the cgroup %s: %w", cg.dir, err)
}

// pgSize reads a size as Postgres writes one (kB, MB, GB, TB: units of
// 1024) or as bytesize.Parse does.
func pgSize(s string) (int64, error) {
	for _, u := range []struct{ pg, iec string }{{"kB", "KiB"}, {"MB", "MiB"}, {"GB", "GiB"}, {"TB", "TiB"}} {
		if num, ok := strings.CutSuffix(strings.TrimSpace(s), u.pg); ok {
			return bytesize.Parse(num + u.iec)
		}
	}
	return bytesize.Parse(s)
}

// pgSizeText writes n bytes as a Postgres setting.
func pgSizeText(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%dMB", n>>20)
	}
	return fmt.Sprintf("%dkB", n>>10)
}

// deployment is the report's account of the tier, made when first needed.
func (b *bench) deployment() *benchreport.Deployment {
	h := &b.report.Header
	if h.Deployment == nil {
		h.Deployment = new(benchreport.Deployment)
	}
	return h.Deployment
}

// readTier reads --pg-cpus, --bench-cpus and --pg-memory, and with
// --pg-memory sets shared_buffers to a quarter of it unless
// --shared-buffers is given, which must then fit under the limit.
func (p *benchParams) readTier(c *cli.Context) error {
	for _, f := range []struct {
		flag string
		dst  **cpuList
	}{{"pg-cpus", &p.pgCPUs}, {"bench-cpus", &p.benchCPUs}, {"sidecar-cpus", &p.sidecarCPUs}} {
		if !c.IsSet(f.flag) {
			continue
		}
		l, err := parseCPUList(c.String(f.flag))
		if err != nil {
			return fmt.Errorf("--%s: %w", f.flag, err)
		}
		*f.dst = &l
	}
	if !c.IsSet("pg-memory") {
		return nil
	}
	var err error
	if p.pgMemory, err = pgSize(c.String("pg-memory")); err != nil {
		return fmt.Errorf("--pg-memory: %w", err)
	}
	if !c.IsSet("shared-buffers") {
		p.sharedBuffers = pgSizeText(p.pgMemory / 4 &^ (8<<10 - 1)) // whole 8 kB pages
		return nil
	}
	sb, err := pgSize(p.sharedBuffers)
	if err != nil {
		return fmt.Errorf("--shared-buffers: %w", err)
	}
	if sb >= p.pgMemory {
		return fmt.Errorf("--shared-buffers %s does not fit in --pg-memory %s: leave it out (a quarter of the limit) or make it smaller", p.sharedBuffers, c.String("pg-memory"))
	}
	return nil
}

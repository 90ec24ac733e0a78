package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on Linux
// whatever the kernel's own tick.
const clockTick = 10 * time.Millisecond

// postgresCPU is the CPU time the throwaway server has used so far: each
// live process's time on the CPU (schedstat, user and system, in ns, which
// the 10 ms ticks of stat would blur over a short run), plus what the
// postmaster's exited children used. ok is false with --source: that
// server's processes may be on another host, or shared with other work.
func (b *bench) postgresCPU() (cpu time.Duration, ok bool) {
	if b.postmaster == 0 {
		return 0, false
	}
	for _, pid := range b.postgresProcesses() {
		t, ok := onCPU(fmt.Sprintf("/proc/%d/schedstat", pid))
		if !ok {
			continue // exited since: its time is in the postmaster's cutime once reaped
		}
		cpu += t
		if pid != b.postmaster {
			continue
		}
		if stat, err := procStat(pid); err == nil {
			cu, _ := strconv.ParseInt(stat[13], 10, 64)
			cs, _ := strconv.ParseInt(stat[14], 10, 64)
			cpu += time.Duration(cu+cs) * clockTick
		}
	}
	return cpu, true
}

// onCPU is the time on the CPU a schedstat file gives (its first field,
// in ns); ok is false if the process or thread is gone.
func onCPU(schedstat string) (t time.Duration, ok bool) {
	raw, err := os.ReadFile(schedstat)
	if err != nil {
		return 0, false
	}
	ns, _ := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
	return time.Duration(ns), true
}

// procStat is /proc/PID/stat's fields after the command name (which may
// hold spaces): [0] is the state, [1] the parent's PID, [13] and [14]
// cutime and cstime.
func procStat(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// sidecarCPU is the CPU time the vecside serve child being measured has
// used so far: the sum of its threads' time on the CPU (schedstat, in
// ns; Go's threads live as long as the process). ok is false where the
// sidecar runs in the bench's own process.
func (b *bench) sidecarCPU() (cpu time.Duration, ok bool) {
	if b.sidecarPID == 0 {
		return 0, false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", b.sidecarPID))
	if err != nil {
		return 0, false
	}
	for _, task := range tasks {
		t, _ := onCPU(fmt.Sprintf("/proc/%d/task/%s/schedstat", b.sidecarPID, task.Name())) // 0 if ended since
		cpu += t
	}
	return cpu, true
}

// cpuMeter holds the server's and the sidecar's CPU time at the start of
// a timed run.
type cpuMeter struct {
	b                  *bench
	postgres, sidecar  time.Duration
	postgresOK, sideOK bool
}

func (b *bench) startCPU() cpuMeter {
	m := cpuMeter{b: b}
	m.postgres, m.postgresOK = b.postgresCPU()
	m.sidecar, m.sideOK = b.sidecarCPU()
	return m
}

// perQuery sets t's CPU figures: each side's CPU time since the start
// over queries, in ms; nil where it is not measured.
func (m cpuMeter) perQuery(queries int, t *timing) {
	per := func(before time.Duration, ok bool, now func() (time.Duration, bool)) *float64 {
		after, nowOK := now()
		if !ok || !nowOK || queries == 0 {
			return nil
		}
		v := ms(after-before) / float64(queries)
		return &v
	}
	t.pgCPU = per(m.postgres, m.postgresOK, m.b.postgresCPU)
	t.sidecarCPU = per(m.sidecar, m.sideOK, m.b.sidecarCPU)
}

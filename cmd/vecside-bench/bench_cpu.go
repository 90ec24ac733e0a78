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
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			continue // exited since: its time is in the postmaster's cutime once reaped
		}
		ns, _ := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		cpu += time.Duration(ns)
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

// cpuPerQuery is the server's CPU time since before over queries, in ms;
// nil where it is not measured.
func (b *bench) cpuPerQuery(before time.Duration, queries int) *float64 {
	now, ok := b.postgresCPU()
	if !ok || queries == 0 {
		return nil
	}
	v := ms(now-before) / float64(queries)
	return &v
}

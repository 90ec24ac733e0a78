package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is a reading of where the machine's and this process's CPU time
// went, to say after a phase whether its figures were set by a full
// machine: on a shared VM the cores also go to other tenants (steal).
type CPU struct {
	at               time.Time
	busy, steal, all uint64        // the machine's ticks (/proc/stat), all cores
	process          time.Duration // this process's user and system time
}

// ReadCPU takes a reading (Linux; elsewhere an error).
func ReadCPU() (CPU, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPU{}, err
	}
	c, err := parseStat(stat)
	if err != nil {
		return CPU{}, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPU{}, err
	}
	c.process = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	c.at = time.Now()
	return c, nil
}

// parseStat reads the machine's line ("cpu  user nice system idle iowait
// irq softirq steal …") of /proc/stat. Guest time is counted in user
// already, so it is not added again.
func parseStat(stat []byte) (CPU, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return CPU{}, fmt.Errorf("loadgen: /proc/stat: %d fields in the cpu line, want at least 8 counters", len(f)-1)
		}
		var n [8]uint64
		for i := range n {
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return CPU{}, fmt.Errorf("loadgen: /proc/stat: %w", err)
			}
			n[i] = v
		}
		user, nice, system, idle, iowait, irq, softirq, steal := n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]
		busy := user + nice + system + irq + softirq
		return CPU{busy: busy, steal: steal, all: busy + idle + iowait + steal}, nil
	}
	return CPU{}, fmt.Errorf("loadgen: /proc/stat has no cpu line")
}

// CPUUse is what a span between two readings spent.
type CPUUse struct {
	Busy, Steal float64 // shares of the machine's time: running, taken by other tenants
	Cores       float64 // this process's CPU time over the span's length
}

// Since is the use from an earlier reading to c.
func (c CPU) Since(earlier CPU) CPUUse {
	all := float64(c.all - earlier.all)
	wall := c.at.Sub(earlier.at).Seconds()
	if all == 0 || wall <= 0 {
		return CPUUse{}
	}
	return CPUUse{
		Busy:  float64(c.busy-earlier.busy) / all,
		Steal: float64(c.steal-earlier.steal) / all,
		Cores: (c.process - earlier.process).Seconds() / wall,
	}
}

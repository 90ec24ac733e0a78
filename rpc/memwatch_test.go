package rpc

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// memWatch samples the memory the process uses for Go objects and
// goroutine stacks while a test attacks the server, so that the test can
// hold the growth the attack caused to a bound. The collector runs with
// the target vecside serve sets (--gc-percent 25), so garbage is counted
// as a running server would hold it.
type memWatch struct {
	base       uint64
	peak       atomic.Uint64
	stop, done chan struct{}
	gcPercent  int
}

// serveGCPercent is vecside serve's default --gc-percent.
const serveGCPercent = 25

func watchMemory() *memWatch {
	w := &memWatch{stop: make(chan struct{}), done: make(chan struct{}), gcPercent: debug.SetGCPercent(serveGCPercent)}
	runtime.GC()
	w.base = memInUse()
	w.peak.Store(w.base)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.sample()
			}
		}
	}()
	return w
}

func memInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

func (w *memWatch) sample() {
	for m := memInUse(); ; {
		p := w.peak.Load()
		if m <= p || w.peak.CompareAndSwap(p, m) {
			return
		}
	}
}

// check stops watching, logs the peak growth over the start and fails
// the test if it exceeds bound bytes.
func (w *memWatch) check(t *testing.T, what string, bound uint64) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.sample()
	debug.SetGCPercent(w.gcPercent)
	growth := w.peak.Load() - w.base
	t.Logf("%s: memory grew by at most %.1f MiB (bound %.0f MiB)", what, float64(growth)/(1<<20), float64(bound)/(1<<20))
	if growth > bound {
		t.Errorf("%s: memory grew by %.1f MiB, more than the %.0f MiB bound", what, float64(growth)/(1<<20), float64(bound)/(1<<20))
	}
}

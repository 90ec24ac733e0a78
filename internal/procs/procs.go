package procs

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// cores is GOMAXPROCS as the runtime set it at start.
var cores = runtime.GOMAXPROCS(0)

// Cores is how many cores the process may use: GOMAXPROCS as the runtime
// set it at start (the CPUs it may run on, a container's CPU limit, or
// the GOMAXPROCS variable), whatever Serve set it to since.
func Cores() int { return cores }

// idleAfter is how long the spare processor outlives the last Hold.
var idleAfter = time.Second

var (
	serving atomic.Bool  // Serve runs: the spare processor is ours to give
	holders atomic.Int64 // Holds not released
	mu      sync.Mutex   // serialises changes of GOMAXPROCS
	raised  bool         // the spare processor runs; under mu
	idle    *time.Timer  // drops it once no Hold has run for idleAfter; under mu
)

// Serve gives the scheduler a spare processor while background work runs
// (Hold), until the returned function is called; not if the GOMAXPROCS
// variable fixes the number of processors.
func Serve() (stop func()) {
	if os.Getenv("GOMAXPROCS") != "" || !serving.CompareAndSwap(false, true) {
		return func() {}
	}
	if holders.Load() > 0 {
		setSpare(true)
	}
	return func() {
		serving.Store(false)
		setSpare(false)
	}
}

// Hold marks CPU-bound background work (the linking of streamed rows) as
// running until release is called: while any runs, and for idleAfter
// after, a serving process has its spare processor.
func Hold() (release func()) {
	if holders.Add(1) == 1 && serving.Load() {
		setSpare(true)
	}
	return func() {
		if holders.Add(-1) > 0 || !serving.Load() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if idle == nil {
			idle = time.AfterFunc(idleAfter, func() { setSpare(false) })
		} else {
			idle.Reset(idleAfter)
		}
	}
}

// setSpare runs the scheduler with the spare processor or without it;
// not with it unless serving, nor without it while serving and held.
func setSpare(on bool) {
	mu.Lock()
	defer mu.Unlock()
	if on == raised || (on && !serving.Load()) || (!on && serving.Load() && holders.Load() > 0) {
		return
	}
	raised = on
	if on {
		runtime.GOMAXPROCS(cores + 1)
	} else {
		runtime.GOMAXPROCS(cores)
	}
}

// slots holds a token for each row being linked in the process.
var slots = make(chan struct{}, cores)

// Slot waits until fewer than Cores pieces of CPU-bound background work
// (a row's link, in any index) run, and counts one more until done is
// called. Take it for one short step at a time, so that the indexes that
// wait for one share the cores in turn.
func Slot() (done func()) {
	slots <- struct{}{}
	return func() { <-slots }
}

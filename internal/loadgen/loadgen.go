// Package loadgen drives the background load of benchmarks that measure
// one thing while another runs (changes applied while clients search):
// workers that repeat a call, and the latencies they saw. Start's workers
// call again as soon as a call returns (a closed loop: they take every
// core they can, so their latency follows the share of the machine left
// to them); Paced's call at a fixed rate (an open loop: latency shows
// what other work does to a load the machine has room for). It does not
// measure what it loads: the benchmark does. ReadCPU's readings say
// what a phase had of the machine: how busy it was, what other tenants
// of a VM's host took (steal), and the cores the process used.
package loadgen

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Latencies are measured durations, in no particular order.
type Latencies []time.Duration

// Ms is the q-quantile (0 ≤ q < 1) in milliseconds, 0 if there is
// none. It sorts l.
func (l Latencies) Ms(q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return float64(l[int(q*float64(len(l)))]) / float64(time.Millisecond)
}

// Workers are goroutines calling a function again and again.
type Workers struct {
	stop  atomic.Bool
	wg    sync.WaitGroup
	began time.Time // the appointed times count from it
	since time.Time // the current window's start; only Window touches it
	// One lock per worker, uncontended but for Window: a long run reports
	// while its workers go on.
	mu   []sync.Mutex
	lat  []Latencies
	errs []error
}

// Result is what the workers did between Start and Stop.
type Result struct {
	Latencies Latencies // of every call that succeeded
	PerSecond float64   // calls that succeeded, per second
	// Err is the first error a call returned; a worker whose call failed
	// stopped calling.
	Err error
}

// Start runs call on n goroutines, each calling it again as soon as it
// returns, until Stop. worker is the goroutine's number, i counts its
// calls.
func Start(n int, call func(worker, i int) error) *Workers {
	return start(n, call, nil)
}

// Paced runs call on n goroutines at rate calls per second in all, each
// goroutine's calls evenly spaced, until Stop. A call starts at its
// appointed time, or at once if the one before ended later, and its
// latency counts from its appointed time: a stall delays every call
// appointed during it, and each of them shows it, as users would.
func Paced(n int, rate float64, call func(worker, i int) error) *Workers {
	return start(n, call, func(began time.Time, worker, i int) time.Time {
		return began.Add(time.Duration(float64(i*n+worker) / rate * float64(time.Second)))
	})
}

// start runs the workers, each call timed from its appointed time (nil:
// from when it starts).
func start(n int, call func(worker, i int) error, appointed func(began time.Time, worker, i int) time.Time) *Workers {
	now := time.Now()
	w := &Workers{began: now, since: now, mu: make([]sync.Mutex, n), lat: make([]Latencies, n), errs: make([]error, n)}
	for worker := range n {
		w.wg.Go(func() {
			for i := 0; !w.stop.Load(); i++ {
				t0 := time.Now()
				if appointed != nil {
					t0 = appointed(w.began, worker, i)
					if time.Sleep(time.Until(t0)); w.stop.Load() {
						return
					}
				}
				err := call(worker, i)
				w.mu[worker].Lock()
				if err != nil {
					w.errs[worker] = err
				} else {
					w.lat[worker] = append(w.lat[worker], time.Since(t0))
				}
				w.mu[worker].Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	return w
}

// Stop asks the workers to stop, waits for the calls under way to end,
// and reports the calls since Start or the last Window.
func (w *Workers) Stop() Result {
	w.stop.Store(true)
	w.wg.Wait()
	return w.Window()
}

// Window reports the calls that ended since Start or the last Window,
// and starts a new window, while the workers go on: a long run's figures
// by period. Err is the first error of a worker that stopped, whichever
// window it stopped in.
func (w *Workers) Window() Result {
	now := time.Now()
	var r Result
	for i := range w.lat {
		w.mu[i].Lock()
		r.Latencies = append(r.Latencies, w.lat[i]...)
		w.lat[i] = nil
		if r.Err == nil {
			r.Err = w.errs[i]
		}
		w.mu[i].Unlock()
	}
	r.PerSecond = float64(len(r.Latencies)) / now.Sub(w.since).Seconds()
	w.since = now
	return r
}

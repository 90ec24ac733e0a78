package procs

import (
	"os"
	"runtime"
)

// cores is GOMAXPROCS as the runtime set it at start.
var cores = runtime.GOMAXPROCS(0)

// Cores is how many cores the process may use: GOMAXPROCS as the runtime
// set it at start (the CPUs it may run on, a container's CPU limit, or
// the GOMAXPROCS variable), whatever Serve set it to since.
func Cores() int { return cores }

// Serve runs the scheduler with Cores()+1 Ps, unless the GOMAXPROCS
// variable fixes their number, and returns the function that restores
// the previous number.
func Serve() (restore func()) {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	before := runtime.GOMAXPROCS(cores + 1)
	return func() { runtime.GOMAXPROCS(before) }
}

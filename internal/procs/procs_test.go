package procs

import (
	"runtime"
	"testing"
	"time"
)

// The spare processor runs while work is held and for idleAfter after,
// only while serving, and never when GOMAXPROCS is set.
func TestServe(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	idleAfter = 40 * time.Millisecond
	procs := func() int { return runtime.GOMAXPROCS(0) }
	release := Hold()
	if procs() != cores {
		t.Fatalf("not serving: %d processors, want %d", procs(), cores)
	}
	stop := Serve()
	if procs() != cores+1 {
		t.Fatalf("serving while held: %d processors, want %d", procs(), cores+1)
	}
	release()
	if procs() != cores+1 {
		t.Fatalf("just released: %d processors, want %d until %v pass", procs(), cores+1, idleAfter)
	}
	deadline := time.Now().Add(5 * time.Second)
	for procs() != cores && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if procs() != cores {
		t.Fatalf("idle for %v: %d processors, want %d", idleAfter, procs(), cores)
	}
	release = Hold()
	if procs() != cores+1 {
		t.Fatalf("held again: %d processors, want %d", procs(), cores+1)
	}
	stop()
	if procs() != cores {
		t.Fatalf("stopped: %d processors, want %d", procs(), cores)
	}
	release()

	t.Setenv("GOMAXPROCS", "1")
	stop = Serve()
	release = Hold()
	if procs() != cores {
		t.Fatalf("GOMAXPROCS set: %d processors, want %d untouched", procs(), cores)
	}
	release()
	stop()
}

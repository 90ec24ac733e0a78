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

// Slot gives out Cores slots at a time and waits for one to come back.
func TestSlot(t *testing.T) {
	var done []func()
	for range cores {
		done = append(done, Slot())
	}
	got := make(chan func())
	go func() { got <- Slot() }()
	select {
	case <-got:
		t.Fatalf("a slot beyond the %d cores was given before one came back", cores)
	case <-time.After(50 * time.Millisecond):
	}
	done[0]()
	select {
	case d := <-got:
		d()
	case <-time.After(5 * time.Second):
		t.Fatal("a slot that came back was not given to the one waiting")
	}
	for _, d := range done[1:] {
		d()
	}
}

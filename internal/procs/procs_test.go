package procs

import (
	"runtime"
	"testing"
)

func TestServe(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	before := runtime.GOMAXPROCS(0)
	restore := Serve()
	if got := runtime.GOMAXPROCS(0); got != Cores()+1 {
		t.Fatalf("serving with %d Ps, want %d", got, Cores()+1)
	}
	if Cores() != cores {
		t.Fatalf("Cores() = %d after Serve, want %d", Cores(), cores)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("%d Ps after restore, want %d", got, before)
	}
	t.Setenv("GOMAXPROCS", "1")
	Serve()()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS set: %d Ps, want %d untouched", got, before)
	}
}

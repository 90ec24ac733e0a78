package heapfetch

import (
	"testing"
	"time"
)

// A failed sidecar is asked last for 1 s, then 2, 4, … up to 30 s while
// it keeps failing; one success ends its back-off.
func TestBackoff(t *testing.T) {
	var b backoff
	now := time.Unix(1000, 0)
	if !b.up(now) {
		t.Fatal("a sidecar that never failed is down")
	}
	for _, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
		b.failed(now)
		want *= time.Second
		if b.up(now.Add(want-time.Millisecond)) || !b.up(now.Add(want)) {
			t.Fatalf("back-off after failing: want %v", want)
		}
	}
	b.succeeded()
	if !b.up(now) {
		t.Fatal("down after a success")
	}
	b.failed(now)
	if !b.up(now.Add(time.Second)) {
		t.Fatal("a failure after a success backs off more than 1 s")
	}
}

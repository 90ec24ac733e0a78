package membw

import "testing"

func TestSum(t *testing.T) {
	for _, n := range []int{0, 8, 127, 128, 1000, 4096} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 7)
		}
		if got, want := Sum(b), sumGo(b); got != want {
			t.Errorf("n=%d: got %d, want %d", n, got, want)
		}
	}
}

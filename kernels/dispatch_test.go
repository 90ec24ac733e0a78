package kernels

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestChoices(t *testing.T) {
	cs := Choices()
	if len(cs) != len(families) {
		t.Fatalf("got %d choices, want %d", len(cs), len(families))
	}
	for _, c := range cs {
		if !slices.Contains(c.Available, c.Impl) {
			t.Errorf("%s: chosen %q is not among the available %v", c.Kernel, c.Impl, c.Available)
		}
		if c.Available[0] != c.Impl {
			t.Errorf("%s: chose %q, not the best available %q", c.Kernel, c.Impl, c.Available[0])
		}
		if last := c.Available[len(c.Available)-1]; !strings.HasPrefix(last, "go") {
			t.Errorf("%s: last implementation %q is not the pure-Go one", c.Kernel, last)
		}
	}
	var b bytes.Buffer
	if err := Describe(&b); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if !strings.Contains(b.String(), c.Kernel) || !strings.Contains(b.String(), c.Impl) {
			t.Errorf("Describe output lacks %s/%s:\n%s", c.Kernel, c.Impl, b.String())
		}
	}
}

package kernels

import (
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// isa identifies one implementation of a kernel family. The hot paths switch
// on it directly instead of calling through function values, so slices
// passed to the kernels do not escape to the heap.
type isa uint8

const (
	isaGo isa = iota
	isaAVX2
	isaAVX512
)

// implChoice is one implementation of a family and whether this CPU runs it.
type implChoice struct {
	isa   isa
	name  string
	avail bool
}

// family is a set of kernels that share one implementation choice. active is
// chosen at start-up as the first available entry of impls (best first; the
// last is always pure Go). Tests switch it with use.
type family struct {
	name   string
	impls  []implChoice
	active isa
}

func newFamily(name, goName string, asm ...implChoice) *family {
	f := &family{name: name, impls: append(asm, implChoice{isaGo, goName, true})}
	for _, c := range f.impls {
		if c.avail {
			f.active = c.isa
			break
		}
	}
	return f
}

func (f *family) activeName() string {
	for _, c := range f.impls {
		if c.isa == f.active {
			return c.name
		}
	}
	panic("kernels: active implementation not registered")
}

func (f *family) availNames() []string {
	var names []string
	for _, c := range f.impls {
		if c.avail {
			names = append(names, c.name)
		}
	}
	return names
}

// use makes the named implementation active; it reports false if this build
// or CPU lacks it. It is not safe to call while kernels run.
func (f *family) use(name string) bool {
	for _, c := range f.impls {
		if c.name == name && c.avail {
			f.active = c.isa
			return true
		}
	}
	return false
}

// families lists every kernel family, in the order Describe prints them.
var families = []*family{f32Family, intFamily, scanFamily}

// Choice is the implementation chosen for one kernel family.
type Choice struct {
	Kernel    string   // family name: "f32", "int8", "fastscan"
	Impl      string   // implementation in use
	Available []string // implementations this binary and CPU can run, best first
}

// Choices reports the implementation chosen for each kernel family.
func Choices() []Choice {
	out := make([]Choice, 0, len(families))
	for _, f := range families {
		out = append(out, Choice{Kernel: f.name, Impl: f.activeName(), Available: f.availNames()})
	}
	return out
}

// cpuFeatures are the CPU features the kernels can use.
var cpuFeatures = []cpuid.FeatureID{
	cpuid.AVX2, cpuid.FMA3, cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL,
	cpuid.AVX512VNNI, cpuid.POPCNT,
}

// Describe writes the CPU, the features relevant to the kernels, and the
// implementation chosen for each kernel family (for `vecside cpu`).
func Describe(w io.Writer) error {
	var have, lack []string
	for _, id := range cpuFeatures {
		if cpuid.CPU.Supports(id) {
			have = append(have, id.String())
		} else {
			lack = append(lack, id.String())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cpu: %s (%s)\n", cpuid.CPU.BrandName, buildFlavour)
	fmt.Fprintf(&b, "features: %s\n", strings.Join(have, " "))
	if len(lack) > 0 {
		fmt.Fprintf(&b, "missing: %s\n", strings.Join(lack, " "))
	}
	for _, c := range Choices() {
		fmt.Fprintf(&b, "%-9s %-12s (available: %s)\n", c.Kernel, c.Impl, strings.Join(c.Available, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

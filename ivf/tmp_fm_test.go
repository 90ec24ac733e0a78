package ivf

import (
	"slices"
	"testing"

	"github.com/vecside/vecside/internal/dataset"
	"github.com/vecside/vecside/internal/store"
	"github.com/vecside/vecside/kernels"
)

func TestTmpFashionLists(t *testing.T) {
	d, _, err := dataset.FashionMNIST("")
	if err != nil {
		t.Skip(err)
	}
	n := len(d)
	s := SampleFor(n, 784)
	cfg := Config{CodedConfig: store.CodedConfig{Metric: kernels.L2, Dims: 784, Store: store.Ext4, Seed: 1}}
	x, _ := New(cfg, d[:s], n)
	for i, v := range d {
		x.Put(keyOf(i), v)
	}
	l := x.Lives()
	t.Logf("sample %d lists %d max %d cap %d needs rebuild %v margin %.2f", s, len(l), slices.Max(l), x.listCap, x.NeedsRebuild(), x.learned)
}

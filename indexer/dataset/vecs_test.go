package dataset

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vecside/vecside/kernels"
)

func TestVecsFiles(t *testing.T) {
	dir := t.TempDir()
	data := [][]float32{{0, 0}, {1, 0}, {3, 0}, {0, 2}}
	base := filepath.Join(dir, "base.fvecs")
	if err := WriteFvecs(base, data); err != nil {
		t.Fatal(err)
	}
	got, err := ReadVecs(base, 0)
	if err != nil || len(got) != 4 || !slices.Equal(got[3], data[3]) {
		t.Fatalf("fvecs: got %v, %v", got, err)
	}
	if got, err := ReadVecs(base, 2); err != nil || len(got) != 2 {
		t.Fatalf("fvecs limited to 2: got %d rows, %v", len(got), err)
	}

	// bvecs: two 3-byte records; ivecs: the same layout with int32s.
	bv := filepath.Join(dir, "b.bvecs")
	os.WriteFile(bv, []byte{3, 0, 0, 0, 1, 2, 255, 3, 0, 0, 0, 4, 5, 6}, 0o644)
	if got, err := ReadVecs(bv, 0); err != nil || !slices.Equal(got[0], []float32{1, 2, 255}) || len(got) != 2 {
		t.Fatalf("bvecs: got %v, %v", got, err)
	}
	var iv []byte
	for _, row := range [][]uint32{{1, 0, 3}, {2, 3, 1}} {
		iv = binary.LittleEndian.AppendUint32(iv, uint32(len(row)))
		for _, x := range row {
			iv = binary.LittleEndian.AppendUint32(iv, x)
		}
	}
	gt := filepath.Join(dir, "gt.ivecs")
	os.WriteFile(gt, iv, 0o644)
	ids, err := ReadIvecs(gt)
	if err != nil || !slices.Equal(ids[1], []int32{2, 3, 1}) {
		t.Fatalf("ivecs: got %v, %v", ids, err)
	}
	truth, err := TruthFromIDs(kernels.L2, data, [][]float32{{0.9, 0}, {2, 1}}, ids, 2)
	if err != nil || !slices.Equal(truth[0].Rows, []int{1, 0}) || math.Abs(truth[0].KthDistance()-0.9) > 1e-6 {
		t.Fatalf("truth from ids: got %+v, %v", truth, err)
	}
	if _, err := TruthFromIDs(kernels.L2, data, [][]float32{{0, 0}, {1, 1}}, ids, 4); err == nil || !strings.Contains(err.Error(), "fewer than k=4") {
		t.Errorf("k beyond the file: %v", err)
	}
	if _, err := TruthFromIDs(kernels.L2, data[:2], [][]float32{{0, 0}, {1, 1}}, ids, 2); err == nil || !strings.Contains(err.Error(), "names row 2") {
		t.Errorf("an id beyond the base: %v", err)
	}

	for name, c := range map[string]struct {
		file string
		raw  []byte
		want string
	}{
		"extension":  {"x.txt", []byte{1, 0, 0, 0, 0}, "want a .fvecs or .bvecs"},
		"empty":      {"e.fvecs", nil, "is empty"},
		"truncated":  {"t.fvecs", []byte{2, 0, 0, 0, 0, 0, 128, 63}, "truncated"},
		"dimensions": {"d.bvecs", []byte{1, 0, 0, 0, 9, 2, 0, 0, 0, 1, 2}, "has dimension 2, the first had 1"},
		"not vecs":   {"n.fvecs", []byte{0, 0, 0, 128}, "is it a *vecs file"},
		"nan":        {"nan.fvecs", []byte{1, 0, 0, 0, 0, 0, 192, 127}, "component 0 is NaN"},
	} {
		path := filepath.Join(dir, c.file)
		os.WriteFile(path, c.raw, 0o644)
		if _, err := ReadVecs(path, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, c.want)
		}
	}
}

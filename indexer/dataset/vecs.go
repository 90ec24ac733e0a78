package dataset

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/vecside/vecside/kernels"
)

// ReadVecs reads the first limit vectors (all of them if limit ≤ 0) of a
// .fvecs (float32) or .bvecs (unsigned bytes) file, told apart by the
// name's extension. Each record is a little-endian int32 dimension
// followed by that many components; every record must have the first
// one's dimension.
func ReadVecs(path string, limit int) ([][]float32, error) {
	var size int
	switch filepath.Ext(path) {
	case ".fvecs":
		size = 4
	case ".bvecs":
		size = 1
	default:
		return nil, fmt.Errorf("dataset: %s: want a .fvecs or .bvecs file", path)
	}
	var out [][]float32
	err := readRecords(path, size, limit, func(raw []byte) error {
		v := make([]float32, len(raw)/size)
		for i := range v {
			if size == 1 {
				v[i] = float32(raw[i])
				continue
			}
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if f := float64(v[i]); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("component %d is %v", i, v[i])
			}
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// ReadIvecs reads an .ivecs file: records of a little-endian int32 count
// and that many int32 values, such as the ids of each query's nearest
// rows in a ground-truth file.
func ReadIvecs(path string) ([][]int32, error) {
	var out [][]int32
	err := readRecords(path, 4, 0, func(raw []byte) error {
		v := make([]int32, len(raw)/4)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// readRecords calls fn with the components of each record of a *vecs
// file, as raw bytes of size each, stopping after limit records if
// limit > 0.
func readRecords(path string, size, limit int, fn func(raw []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var raw []byte
	dims := -1
	for n := 0; limit <= 0 || n < limit; n++ {
		var d int32
		if err := binary.Read(r, binary.LittleEndian, &d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("dataset: %s: record %d: %w", path, n, err)
		}
		if dims < 0 {
			if d < 1 || d > 1<<16 {
				return fmt.Errorf("dataset: %s: dimension %d in the first record; is it a *vecs file?", path, d)
			}
			dims = int(d)
			raw = make([]byte, dims*size)
		}
		if int(d) != dims {
			return fmt.Errorf("dataset: %s: record %d has dimension %d, the first had %d", path, n, d, dims)
		}
		if _, err := io.ReadFull(r, raw); err != nil {
			return fmt.Errorf("dataset: %s: record %d is truncated: %w", path, n, err)
		}
		if err := fn(raw); err != nil {
			return fmt.Errorf("dataset: %s: record %d: %w", path, n, err)
		}
	}
	if dims < 0 {
		return fmt.Errorf("dataset: %s is empty", path)
	}
	return nil
}

// TruthFromIDs turns given nearest-row ids (a ground-truth file's, nearest
// first) into Truth for the first k of each query, with distances
// computed exactly from data.
func TruthFromIDs(m kernels.Metric, data, queries [][]float32, ids [][]int32, k int) ([]Truth, error) {
	if len(ids) != len(queries) {
		return nil, fmt.Errorf("dataset: the ground truth has %d queries, the query file %d", len(ids), len(queries))
	}
	out := make([]Truth, len(queries))
	for qi, row := range ids {
		if len(row) < k {
			return nil, fmt.Errorf("dataset: the ground truth holds %d neighbours per query, fewer than k=%d", len(row), k)
		}
		type near struct {
			row  int
			dist float64
		}
		ns := make([]near, k)
		for i, id := range row[:k] {
			if id < 0 || int(id) >= len(data) {
				return nil, fmt.Errorf("dataset: the ground truth of query %d names row %d; the base file has %d", qi, id, len(data))
			}
			ns[i] = near{int(id), m.Distance(queries[qi], data[id])}
		}
		// Nearest first, as KthDistance expects, even where the file's
		// order differs from ours in the last bits.
		slices.SortStableFunc(ns, func(a, b near) int { return cmp.Compare(a.dist, b.dist) })
		for _, n := range ns {
			out[qi].Rows = append(out[qi].Rows, n.row)
			out[qi].Distances = append(out[qi].Distances, n.dist)
		}
	}
	return out, nil
}

// WriteFvecs writes vecs to path as an .fvecs file.
func WriteFvecs(path string, vecs [][]float32) error {
	var buf []byte
	for _, v := range vecs {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(v)))
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
	}
	return os.WriteFile(path, buf, 0o644)
}

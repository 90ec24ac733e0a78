package dataset

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist package puts the
// files.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNIST loads Fashion-MNIST from dir (FashionMNISTDir if empty):
// the 60,000 training images as data and the 10,000 test images as
// queries, each a 784-d vector of pixel values 0-255, compared with L2.
func FashionMNIST(dir string) (data, queries [][]float32, err error) {
	if dir == "" {
		dir = FashionMNISTDir
	}
	if data, err = readIDXImages(filepath.Join(dir, "train-images-idx3-ubyte.gz")); err != nil {
		return nil, nil, err
	}
	if queries, err = readIDXImages(filepath.Join(dir, "t10k-images-idx3-ubyte.gz")); err != nil {
		return nil, nil, err
	}
	return data, queries, nil
}

// readIDXImages reads a gzipped IDX file of unsigned bytes with three
// dimensions (images × rows × columns): magic 0x00000803, then the three
// sizes as big-endian uint32, then the pixels.
func readIDXImages(path string) ([][]float32, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dataset: %s is missing: install Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: %w", path, err)
		}
		r = zr
	}
	return decodeIDXImages(r, path)
}

func decodeIDXImages(r io.Reader, name string) ([][]float32, error) {
	var head [4]uint32
	if err := binary.Read(r, binary.BigEndian, &head); err != nil {
		return nil, fmt.Errorf("dataset: %s: reading the IDX header: %w", name, err)
	}
	if head[0] != 0x00000803 {
		return nil, fmt.Errorf("dataset: %s: magic %#08x, want 0x00000803 (unsigned bytes, 3 dimensions)", name, head[0])
	}
	n, dims := int(head[1]), int(head[2])*int(head[3])
	if n > 1<<24 || dims > 1<<16 {
		return nil, fmt.Errorf("dataset: %s: implausible sizes %d × %d", name, n, dims)
	}
	raw := make([]byte, dims)
	out := make([][]float32, n)
	for i := range out {
		if _, err := io.ReadFull(r, raw); err != nil {
			return nil, fmt.Errorf("dataset: %s: image %d: %w", name, i, err)
		}
		v := make([]float32, dims)
		for j, b := range raw {
			v[j] = float32(b)
		}
		out[i] = v
	}
	return out, nil
}

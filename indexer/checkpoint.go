package indexer

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Checkpoint files hold one index each:
//
//	magic      8 bytes  "VECSIDE\x00"
//	version    uint16   checkpointVersion
//	headerLen  uint32
//	header     JSON of CheckpointHeader
//	body       the skipped keys, the rows' xids (from version 3), the
//	           recall calibration (from version 4, see calibrated) and
//	           the index kind's own format, to the end less 12 bytes
//	bodyLen    uint64   length of body
//	crc        uint32   CRC-32C of everything before it
//
// All integers little-endian. The header is JSON because it is small,
// read once, and worth being able to inspect; the body is binary.
// Trailing length and checksum let the body be streamed out without
// knowing its size in advance; a reader checks both before it parses the
// body, so a torn or corrupt file is refused, never half-loaded.
//
// Versions: 3 added the rows' xids, 4 the recall calibration, 5 the
// table's OID (and the database's name) in the header. Version 5 changed
// no byte of the body: it is a new number because a file without the OID
// cannot show that it is of the table now under its name, which may have
// been dropped and created again since. ReadCheckpoint still reads the
// older versions' framing (a tool may inspect them), but LoadCheckpoint
// refuses them, and the table is copied again.
const (
	checkpointMagic   = "VECSIDE\x00"
	checkpointVersion = 5
	// oldestCheckpoint is the oldest format whose framing this build
	// reads.
	oldestCheckpoint = 2
	// tableOIDCheckpoint is the first format that records the table's
	// OID, and the oldest LoadCheckpoint loads.
	tableOIDCheckpoint = 5
	trailerLen         = 12
)

// ErrCorruptCheckpoint marks a checkpoint file that fails its checks.
var ErrCorruptCheckpoint = errors.New("corrupt checkpoint")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CheckpointHeader describes an index checkpoint: enough to refuse one that
// does not belong to this index, source or slot.
type CheckpointHeader struct {
	Index      string `json:"index"`
	Kind       string `json:"kind"`
	Params     string `json:"params"` // the spec in --index grammar
	Dims       int    `json:"dims"`
	HasIndex   bool   `json:"has_index"` // false: the table had no valid row yet
	Metric     string `json:"metric"`
	KeyType    uint8  `json:"key_type"`
	VectorType uint8  `json:"vector_type"`
	LSN        LSN    `json:"lsn"`     // everything up to here is reflected
	Version    uint64 `json:"version"` // changes applied, see Entry.version
	SystemID   uint64 `json:"system_id"`
	Timeline   uint32 `json:"timeline"`
	Slot       string `json:"slot"`
	// Database is the source database's name (see Source.Database).
	Database string `json:"database"`
	// TableOID is the pg_class OID of the table the index followed (see
	// Table); 0 if none was known. From format 5.
	TableOID uint32 `json:"table_oid"`
	// Format is the file's format version, set by ReadCheckpoint.
	Format uint16 `json:"-"`
}

// WriteCheckpoint writes a checkpoint to path atomically (see
// writeFileAtomic): header, the body that body writes, then the trailer.
func WriteCheckpoint(path string, h CheckpointHeader, body func(io.Writer) error) error {
	hdr, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, func(f io.Writer) error {
		crc := crc32.New(castagnoli)
		bw := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
		var pre []byte
		pre = append(pre, checkpointMagic...)
		pre = binary.LittleEndian.AppendUint16(pre, checkpointVersion)
		pre = binary.LittleEndian.AppendUint32(pre, uint32(len(hdr)))
		pre = append(pre, hdr...)
		if _, err := bw.Write(pre); err != nil {
			return err
		}
		counter := &countingWriter{w: bw}
		if err := body(counter); err != nil {
			return err
		}
		if err := binary.Write(bw, binary.LittleEndian, counter.n); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return binary.Write(f, binary.LittleEndian, crc.Sum32())
	})
}

// writeFileAtomic writes path through a temporary file in the same
// directory, fsynced, renamed over path, and the directory fsynced, so that
// after a crash path holds either the old or the new contents, whole.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// ReadCheckpoint opens path, checks its framing and its checksum, and
// only then hands the header and body to load: no count or length read
// from a corrupt body is ever trusted, so a damaged file is refused whole
// instead of making the loader allocate from garbage. Checking costs one
// extra sequential read of the file, from the page cache the second time.
func ReadCheckpoint(path string, load func(CheckpointHeader, io.Reader) error) (CheckpointHeader, error) {
	var h CheckpointHeader
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return h, err
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorruptCheckpoint, path, fmt.Sprintf(format, args...))
	}
	if err := verifyTrailer(f, fi.Size()); err != nil {
		return h, corrupt("%v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return h, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	h, bodyLen, err := readHeader(r, fi.Size())
	if err != nil {
		return h, corrupt("%v", err)
	}
	body := &io.LimitedReader{R: r, N: bodyLen}
	if err := load(h, body); err != nil {
		return h, corrupt("body: %v", err)
	}
	if body.N != 0 {
		return h, corrupt("%d body bytes left unread", body.N)
	}
	return h, nil
}

// ReadCheckpointHeader reads the header of the checkpoint at path, and
// nothing else: the body and its checksum are not read, so what it says
// is a hint (which table the index followed) until ReadCheckpoint has
// checked the file.
func ReadCheckpointHeader(path string) (CheckpointHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return CheckpointHeader{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return CheckpointHeader{}, err
	}
	h, _, err := readHeader(bufio.NewReader(f), fi.Size())
	if err != nil {
		return h, fmt.Errorf("%w: %s: %v", ErrCorruptCheckpoint, path, err)
	}
	return h, nil
}

// readHeader reads a checkpoint's framing and header from r, at the start
// of a file of size bytes, and returns the length of the body after it.
func readHeader(r io.Reader, size int64) (h CheckpointHeader, bodyLen int64, err error) {
	var pre [14]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return h, 0, errors.New("short file")
	}
	if string(pre[:8]) != checkpointMagic {
		return h, 0, errors.New("bad magic")
	}
	v := binary.LittleEndian.Uint16(pre[8:])
	if v < oldestCheckpoint || v > checkpointVersion {
		return h, 0, fmt.Errorf("format version %d, this build reads %d to %d", v, oldestCheckpoint, checkpointVersion)
	}
	hlen := int64(binary.LittleEndian.Uint32(pre[10:]))
	bodyLen = size - 14 - hlen - trailerLen
	if hlen > 1<<20 || bodyLen < 0 {
		return h, 0, fmt.Errorf("bad header length %d for a file of %d bytes", hlen, size)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return h, 0, errors.New("short header")
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return h, 0, fmt.Errorf("header: %v", err)
	}
	h.Format = v
	return h, bodyLen, nil
}

// verifyTrailer reads the whole file once and checks the trailer: the body
// length it records against the file's size, and the CRC-32C of
// everything before the checksum.
func verifyTrailer(f *os.File, size int64) error {
	if size < 14+trailerLen {
		return errors.New("short file")
	}
	crc := crc32.New(castagnoli)
	if _, err := io.Copy(crc, io.NewSectionReader(f, 0, size-4)); err != nil {
		return err
	}
	var trailer [trailerLen]byte
	if _, err := f.ReadAt(trailer[:], size-trailerLen); err != nil {
		return err
	}
	var pre [14]byte
	if _, err := f.ReadAt(pre[:], 0); err != nil {
		return err
	}
	bodyLen := size - 14 - int64(binary.LittleEndian.Uint32(pre[10:])) - trailerLen
	if got := binary.LittleEndian.Uint64(trailer[:8]); got != uint64(bodyLen) {
		return fmt.Errorf("body length %d, trailer says %d", bodyLen, got)
	}
	if got, want := binary.LittleEndian.Uint32(trailer[8:]), crc.Sum32(); got != want {
		return fmt.Errorf("checksum %08x, computed %08x", got, want)
	}
	return nil
}

package indexer

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a position in Postgres's write-ahead log.
type LSN uint64

// String formats the LSN as Postgres does: high/low 32 bits in hex.
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// ParseLSN reads the X/Y form.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if ok {
		h, err1 := strconv.ParseUint(hi, 16, 32)
		l, err2 := strconv.ParseUint(lo, 16, 32)
		if err1 == nil && err2 == nil {
			return LSN(h<<32 | l), nil
		}
	}
	return 0, fmt.Errorf("%w: LSN %q: want the form 16/B374D848", ErrInvalidArgument, s)
}

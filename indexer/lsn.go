package indexer

import (
	"fmt"

	"github.com/jackc/pglogrepl"
)

// LSN is a position in Postgres's write-ahead log.
type LSN = pglogrepl.LSN

// ParseLSN reads the X/Y form, with an error that says what to pass.
func ParseLSN(s string) (LSN, error) {
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("%w: LSN %q: want the form 16/B374D848", ErrInvalidArgument, s)
	}
	return lsn, nil
}

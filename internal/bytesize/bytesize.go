// Package bytesize reads the sizes that flags of vecside's commands take:
// a number of bytes, or one with a binary unit (KiB, MiB, GiB, TiB: units
// of 1024), as in 512MiB or 1.5GiB. Decimal units (MB) are refused rather
// than guessed at: Postgres means 1024 by them, most other tools 1000.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a size such as 512MiB, 6GiB or 1000000.
func Parse(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(strings.TrimSpace(s), u.suffix); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || n <= 0 {
				break
			}
			return int64(n * float64(u.mult)), nil
		}
	}
	return 0, fmt.Errorf("%q: want a size such as 512MiB or 6GiB", s)
}

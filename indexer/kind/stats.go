package kind

import (
	"slices"
	"strconv"
	"strings"
)

// Stats describe an index's size and shape, for vecside_status(), the
// metrics and the bench. Every byte an index holds resident is counted
// in one of the three byte fields or in a Memory figure.
type Stats struct {
	Rows int // keys held
	// CodeBytes is codes and their factors, extended codes, centroids and
	// list structure (or the vectors, for the exact float index).
	CodeBytes int64
	// FloatBytes is float32 vectors kept beside the codes (store=float).
	FloatBytes int64
	// KeyBytes is keys, the key index, row locations and live sets.
	KeyBytes int64
	// Figures are the kind's own numbers: one reading of each figure its
	// Kind declares, in that order.
	Figures []Reading
}

// Bytes is everything the index holds.
func (s Stats) Bytes() int64 {
	n := s.CodeBytes + s.FloatBytes + s.KeyBytes
	for _, r := range s.Figures {
		if r.Type == Memory {
			n += int64(r.Value)
		}
	}
	return n
}

// BytesPerRow is Bytes per row held.
func (s Stats) BytesPerRow() float64 {
	if s.Rows == 0 {
		return 0
	}
	return float64(s.Bytes()) / float64(s.Rows)
}

// Value is the reading of the figure called name, if the index reports
// one.
func (s Stats) Value(name string) (float64, bool) {
	i := slices.IndexFunc(s.Figures, func(r Reading) bool { return r.Name == name })
	if i < 0 {
		return 0, false
	}
	return s.Figures[i].Value, true
}

// FigurePairs is the figures as name=value pairs, the grammar of the
// index options, in the order the kind declares them.
func (s Stats) FigurePairs() string {
	pairs := make([]string, len(s.Figures))
	for i, r := range s.Figures {
		pairs[i] = r.Name + "=" + strconv.FormatFloat(r.Value, 'f', -1, 64)
	}
	return strings.Join(pairs, " ")
}

// Figure is a number the indexes of a kind report about themselves
// beside the rows and bytes every kind reports: a graph's rows awaiting
// repair, the sizes of inverted lists. A kind declares each of its
// figures once, in Kind.Figures, and its Stats carry a reading of each;
// the sidecar exports it as the series vecside_index_<Name> by index,
// vecside_status() shows it in its figures column, and the bench prints
// it, so that a kind's figures need no code outside its package.
type Figure struct {
	// Name is lower-case letters, digits and underscores, from a letter;
	// a Counter's ends in _total, no other's does. It must not be one of
	// the series the sidecar keeps for every index (rows, bytes, …),
	// whose registry refuses a second help text at start.
	Name string
	// Help is the series' help text: one sentence saying what is counted.
	Help string
	Type FigureType
}

// FigureType is what kind of number a figure is.
type FigureType uint8

const (
	// Gauge is a level that may go down as well as up.
	Gauge FigureType = iota
	// Counter is a count that only grows while the index lives.
	Counter
	// Memory is bytes the index holds beside its codes, vectors and keys
	// (a graph's neighbour lists): a gauge, and part of Stats.Bytes.
	Memory
)

// Reading is a figure's value when Stats was taken.
type Reading struct {
	*Figure
	Value float64
}

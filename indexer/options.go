package indexer

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/vecside/vecside/hnsw"
	"github.com/vecside/vecside/internal/knnlimits"
)

// Options are key=value settings in the one grammar vecside uses
// everywhere: --index definitions, knn's options argument, SET vecside.<key>
// and the config file. Pairs are separated by white space; keys are
// lower-case identifiers; a value is a word without white space, or
// quoted in single quotes as SQL quotes a string (” for a quote), which
// lets it hold spaces: where='id % 2 = 0'.
type Options map[string]string

var optionKey = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ParseOptions parses "a=1 b=two c='x y'". Repeated keys are an error.
func ParseOptions(s string) (Options, error) {
	opts := Options{}
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return opts, nil
		}
		end := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\'' })
		if end < 0 {
			end = len(s)
		}
		field := s[:end]
		k, v, ok := strings.Cut(field, "=")
		s = s[end:]
		if ok && v == "" && strings.HasPrefix(s, "'") {
			var err error
			if v, s, err = unquote(s); err != nil {
				return nil, fmt.Errorf("%w: option %q: %v", ErrInvalidArgument, k, err)
			}
			field += "'" + v + "'"
		}
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: option %q: want key=value", ErrInvalidArgument, field)
		}
		if s != "" && !unicode.IsSpace(rune(s[0])) {
			return nil, fmt.Errorf("%w: option %q: a value is a word or a whole 'quoted string'", ErrInvalidArgument, k)
		}
		if !optionKey.MatchString(k) {
			return nil, fmt.Errorf("%w: option %q: %q is not a valid key", ErrInvalidArgument, field, k)
		}
		if _, dup := opts[k]; dup {
			return nil, fmt.Errorf("%w: option %q given twice", ErrInvalidArgument, k)
		}
		opts[k] = v
	}
}

// unquote reads the 'quoted string' s starts with, and returns it and
// what follows it.
func unquote(s string) (value, rest string, err error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		if b.Len() == 0 {
			return "", "", errors.New("empty quoted value")
		}
		return b.String(), s[i+1:], nil
	}
	return "", "", errors.New("unterminated quoted value")
}

// String renders the options sorted by key, in the grammar ParseOptions
// reads, quoting the values that need it.
func (o Options) String() string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + quoteOption(o[k]))
	}
	return b.String()
}

// quoteOption quotes a value that holds white space or quotes.
func quoteOption(v string) string {
	if !strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '\'' }) {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// MaxCandidates bounds k × oversample (see knnlimits).
const MaxCandidates = knnlimits.MaxCandidates

// SearchOptions are the per-query settings, from SET vecside.<key> and
// knn's options argument.
type SearchOptions struct {
	// Oversample caps the candidates at k × Oversample; 0 takes the
	// index's default (DefaultOversample). A quantized index returns the
	// smallest set its error bounds say holds the k nearest, up to that cap
	// (ivf store=float, exact within its probed lists, returns k); the
	// exact float flat index returns k × Oversample. The client re-ranks
	// them against the heap.
	Oversample float64
	// Probes is how many IVF lists a query scans; 0 means the index's
	// default (its probes= option, else 2% of its lists, at least 4).
	Probes int
	// EfSearch is the beam width of an HNSW query; 0 means the index's
	// default (its ef_search= option, else hnsw.DefaultEfSearch). At least
	// k is used.
	EfSearch int
	// Timeout bounds the whole request, including waiting for MinLSN.
	Timeout time.Duration
	// MinLSN, if set, makes the search wait until the index has applied
	// the WAL up to it (read-your-writes: pass pg_current_wal_lsn() taken
	// after a write).
	MinLSN LSN
	// WithXID makes knn fill its xid column: per candidate, the id of the
	// transaction that wrote the row its distance comes from, where that
	// distance is exact (store=float) and the xid known; NULL elsewhere.
	WithXID bool
	// XIDSource, if set, is the source the client expects the xids to
	// come from (the system identifier, as vecside_status() reports it,
	// and the timeline): a search that does not run entirely under that
	// source returns none.
	XIDSource *Source
	// Allow, if not nil, restricts the search to these keys (in their
	// canonical form, see pgvalue.KeyType): knn's allow argument, the
	// pre-filter of a filtered search. Empty allows nothing.
	Allow []string
}

// DefaultSearchOptions are used where a session has not SET anything:
// each index's own oversampling and probing, a 30 s deadline.
func DefaultSearchOptions() SearchOptions {
	return SearchOptions{Timeout: 30 * time.Second}
}

// MaxProbes bounds probes.
const MaxProbes = 1 << 20

// MaxEfSearch bounds ef_search, as hnsw bounds its beam widths.
const MaxEfSearch = hnsw.MaxEf

// searchSetters is the vocabulary of search options: every key a client may
// SET or pass to knn, with its parser. Unknown keys are errors.
var searchSetters = map[string]func(*SearchOptions, string) error{
	"oversample": func(o *SearchOptions, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 1 && f <= MaxCandidates || f == 0) {
			return fmt.Errorf("oversample=%s: want a number from 1 to %d (0: the index's default)", v, MaxCandidates)
		}
		o.Oversample = f
		return nil
	},
	"probes": func(o *SearchOptions, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxProbes {
			return fmt.Errorf("probes=%s: want an integer from 1 to %d (0: the index's default)", v, MaxProbes)
		}
		o.Probes = n
		return nil
	},
	"ef_search": func(o *SearchOptions, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxEfSearch {
			return fmt.Errorf("ef_search=%s: want an integer from 1 to %d (0: the index's default)", v, MaxEfSearch)
		}
		o.EfSearch = n
		return nil
	},
	"min_lsn": func(o *SearchOptions, v string) error {
		lsn, err := ParseLSN(v)
		if err != nil {
			return fmt.Errorf("min_lsn=%s: want an LSN such as 0/16B3748", v)
		}
		o.MinLSN = lsn
		return nil
	},
	"with_xid": func(o *SearchOptions, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("with_xid=%s: want true or false", v)
		}
		o.WithXID = b
		return nil
	},
	"xid_source": func(o *SearchOptions, v string) error {
		sys, tli, ok := strings.Cut(v, "/")
		id, err1 := strconv.ParseInt(sys, 10, 64)
		t, err2 := strconv.ParseUint(tli, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("xid_source=%s: want system_identifier/timeline as vecside_status() reports them, such as 7345216198834587648/1", v)
		}
		o.XIDSource = &Source{SystemID: uint64(id), Timeline: uint32(t)}
		return nil
	},
	"timeout": func(o *SearchOptions, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout=%s: want a positive duration such as 500ms or 5s", v)
		}
		o.Timeout = d
		return nil
	},
}

// Set applies one option; an unknown key or a bad value is an error
// wrapping ErrInvalidArgument.
func (o *SearchOptions) Set(key, value string) error {
	set, ok := searchSetters[key]
	if !ok {
		return fmt.Errorf("%w: unknown search option %q (known: %s)", ErrInvalidArgument, key, strings.Join(SearchOptionKeys(), ", "))
	}
	if err := set(o, value); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return nil
}

// Apply sets every option of opts, in key order.
func (o *SearchOptions) Apply(opts Options) error {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := o.Set(k, opts[k]); err != nil {
			return err
		}
	}
	return nil
}

// Get renders one option's current value, for SHOW.
func (o SearchOptions) Get(key string) (string, error) {
	switch key {
	case "oversample":
		return strconv.FormatFloat(o.Oversample, 'g', -1, 64), nil
	case "timeout":
		return o.Timeout.String(), nil
	case "min_lsn":
		return o.MinLSN.String(), nil
	case "probes":
		return strconv.Itoa(o.Probes), nil
	case "ef_search":
		return strconv.Itoa(o.EfSearch), nil
	case "with_xid":
		return strconv.FormatBool(o.WithXID), nil
	case "xid_source":
		if o.XIDSource == nil {
			return "", nil
		}
		return fmt.Sprintf("%d/%d", int64(o.XIDSource.SystemID), o.XIDSource.Timeline), nil
	}
	return "", fmt.Errorf("%w: unknown search option %q", ErrInvalidArgument, key)
}

// SearchOptionKeys lists the known search options, sorted.
func SearchOptionKeys() []string {
	keys := make([]string, 0, len(searchSetters))
	for k := range searchSetters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Candidates is how many rows a search for k returns: k × oversample,
// rounded up, or an error if that exceeds MaxCandidates or k < 1.
func (o SearchOptions) Candidates(k int) (int, error) {
	if k < 1 {
		return 0, fmt.Errorf("%w: k=%d, want k ≥ 1", ErrInvalidArgument, k)
	}
	n := float64(k) * max(o.Oversample, 1)
	if n > MaxCandidates {
		return 0, fmt.Errorf("%w: k × oversample = %g candidates, at most %d may be asked", ErrInvalidArgument, n, MaxCandidates)
	}
	return int(math.Ceil(n)), nil
}

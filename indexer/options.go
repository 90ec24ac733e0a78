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

	"github.com/vecside/vecside/indexer/kind"
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
	// Settings are the index kinds' own settings (probes= for ivf,
	// ef_search= for hnsw: see each kind's registration); a missing one,
	// or 0, is the index's default. Set them with Set, which copies.
	Settings kind.Settings
	// Recall is the recall@10 the search aims for where it leaves the
	// kind's tuning setting unset (see calibrated); 0 takes the index's
	// target (recall= in its spec, else kind.DefaultRecall).
	Recall float64
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

// searchOption is one search option: its parser and, for SHOW, its
// renderer.
type searchOption struct {
	set func(*SearchOptions, string) error
	get func(SearchOptions) string
}

// searchOptions is the vocabulary of search options every index takes;
// the kinds' settings (kind.LookupSetting) add theirs. Unknown keys are
// errors.
var searchOptions = map[string]searchOption{
	"oversample": {func(o *SearchOptions, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 1 && f <= MaxCandidates || f == 0) {
			return fmt.Errorf("oversample=%s: want a number from 1 to %d (0: the index's default)", v, MaxCandidates)
		}
		o.Oversample = f
		return nil
	}, func(o SearchOptions) string { return strconv.FormatFloat(o.Oversample, 'g', -1, 64) }},
	"min_lsn": {func(o *SearchOptions, v string) error {
		lsn, err := ParseLSN(v)
		if err != nil {
			return fmt.Errorf("min_lsn=%s: want an LSN such as 0/16B3748", v)
		}
		o.MinLSN = lsn
		return nil
	}, func(o SearchOptions) string { return o.MinLSN.String() }},
	"with_xid": {func(o *SearchOptions, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("with_xid=%s: want true or false", v)
		}
		o.WithXID = b
		return nil
	}, func(o SearchOptions) string { return strconv.FormatBool(o.WithXID) }},
	"xid_source": {func(o *SearchOptions, v string) error {
		sys, tli, ok := strings.Cut(v, "/")
		id, err1 := strconv.ParseInt(sys, 10, 64)
		t, err2 := strconv.ParseUint(tli, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("xid_source=%s: want system_identifier/timeline as vecside_status() reports them, such as 7345216198834587648/1", v)
		}
		o.XIDSource = &Source{SystemID: uint64(id), Timeline: uint32(t)}
		return nil
	}, func(o SearchOptions) string {
		if o.XIDSource == nil {
			return ""
		}
		return fmt.Sprintf("%d/%d", int64(o.XIDSource.SystemID), o.XIDSource.Timeline)
	}},
	"recall": {func(o *SearchOptions, v string) error {
		if v == "0" {
			o.Recall = 0
			return nil
		}
		r, err := kind.ParseRecall("recall", v)
		if err != nil {
			return fmt.Errorf("recall=%s: want a recall@10 target from 0.5 to 0.999 (0: the index's own)", v)
		}
		o.Recall = r
		return nil
	}, func(o SearchOptions) string { return strconv.FormatFloat(o.Recall, 'g', -1, 64) }},
	"timeout": {func(o *SearchOptions, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout=%s: want a positive duration such as 500ms or 5s", v)
		}
		o.Timeout = d
		return nil
	}, func(o SearchOptions) string { return o.Timeout.String() }},
}

// lookupSearchOption finds key among the options every index takes, then
// among the kinds' settings.
func lookupSearchOption(key string) (searchOption, bool) {
	if opt, ok := searchOptions[key]; ok {
		return opt, true
	}
	s, ok := kind.LookupSetting(key)
	if !ok {
		return searchOption{}, false
	}
	return searchOption{
		set: func(o *SearchOptions, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > s.Max {
				return fmt.Errorf("%s=%s: want an integer from 1 to %d (0: the index's default)", key, v, s.Max)
			}
			o.Settings = o.Settings.With(key, n)
			return nil
		},
		get: func(o SearchOptions) string { return strconv.Itoa(o.Settings[key]) },
	}, true
}

// Set applies one option; an unknown key or a bad value is an error
// wrapping ErrInvalidArgument.
func (o *SearchOptions) Set(key, value string) error {
	opt, ok := lookupSearchOption(key)
	if !ok {
		return fmt.Errorf("%w: unknown search option %q (known: %s)", ErrInvalidArgument, key, strings.Join(SearchOptionKeys(), ", "))
	}
	if err := opt.set(o, value); err != nil {
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
	opt, ok := lookupSearchOption(key)
	if !ok {
		return "", fmt.Errorf("%w: unknown search option %q", ErrInvalidArgument, key)
	}
	return opt.get(o), nil
}

// SearchOptionKeys lists the known search options, sorted.
func SearchOptionKeys() []string {
	keys := kind.SettingNames()
	for k := range searchOptions {
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

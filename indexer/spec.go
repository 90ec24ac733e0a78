package indexer

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/indexer/store"
	"github.com/vecside/vecside/kernels"
)

// Spec defines one index: what it reads and how it is built.
//
//	NAME=SCHEMA.TABLE(COLUMN) key=KEYCOL metric=l2|cosine|ip [kind=flat|ivf|hnsw] [dims=N] [where='CONDITION'] [KIND OPTIONS]
//
// Kind options (each kind registers its own: see package indexer/kind
// and the kinds' kind.go): kind=flat store=float|ext4|ext6|ext8
// (default float, the exact float32 index); kind=ivf lists=N probes=N
// store=float|ext4|ext6|ext8 (default ext4) bits=4|6|8; kind=hnsw m=N
// ef_construction=N ef_search=N store=float|ext4|ext6|ext8 (default ext6)
// bits=4|6|8.
//
// Identifiers follow SQL: unquoted ones are folded to lower case, double
// quotes keep case and allow any character.
type Spec struct {
	Name   string // index name: [a-z_][a-z0-9_]{0,62}, used in files and metrics
	Schema string // default public
	Table  string
	Column string // the vector column
	Key    string // the key column: the table's replica identity
	Metric kernels.Metric
	Kind   string
	// Dims fixes the dimension; 0 takes it from vector(n), or else from the
	// first valid row of the initial copy.
	Dims int
	// Where, if not empty, is a row filter: the index holds only the rows
	// that satisfy it (a SQL condition on the table's replica-identity
	// columns, e.g. "id % 2 = 0"), one shard of a table that several
	// sidecars share. It becomes the row filter of the table in the
	// sidecar's publication (PostgreSQL 15+), and the copy applies it too,
	// so every index of the table in one sidecar must give the same.
	Where string
	// Options are the kind-specific build options, validated by the kind
	// (see kind.Kind.Validate).
	Options Options
}

var unquotedIdent = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

var indexName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidName reports whether name may name an index.
func ValidName(name string) error {
	if !indexName.MatchString(name) {
		return fmt.Errorf("index name %q: want [a-z_][a-z0-9_]{0,62} (it names files and metric labels)", name)
	}
	return nil
}

// ParseSpec parses an --index definition.
func ParseSpec(def string) (Spec, error) {
	fail := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("--index %q: %s", def, fmt.Sprintf(format, args...))
	}
	name, rest, ok := strings.Cut(strings.TrimSpace(def), "=")
	if !ok {
		return fail("want NAME=SCHEMA.TABLE(COLUMN) key=KEYCOL metric=l2|cosine|ip kind=flat")
	}
	s := Spec{Name: strings.TrimSpace(name), Schema: "public", Kind: "flat"}
	if err := ValidName(s.Name); err != nil {
		return fail("%v", err)
	}
	open := strings.IndexByte(rest, '(')
	close := strings.IndexByte(rest, ')')
	if open < 0 || close < open {
		return fail("want SCHEMA.TABLE(COLUMN) after the name")
	}
	rel, err := splitIdents(rest[:open])
	if err != nil || len(rel) < 1 || len(rel) > 2 {
		return fail("bad table name %q", rest[:open])
	}
	if len(rel) == 2 {
		s.Schema = rel[0]
	}
	s.Table = rel[len(rel)-1]
	col, err := splitIdents(rest[open+1 : close])
	if err != nil || len(col) != 1 {
		return fail("bad column name %q", rest[open+1:close])
	}
	s.Column = col[0]
	opts, err := ParseOptions(rest[close+1:])
	if err != nil {
		return fail("%v", err)
	}
	for k, v := range opts {
		switch k {
		case "key":
			id, err := splitIdents(v)
			if err != nil || len(id) != 1 {
				return fail("bad key column %q", v)
			}
			s.Key = id[0]
		case "metric":
			if s.Metric, err = kernels.ParseMetric(v); err != nil {
				return fail("%v", err)
			}
		case "kind":
			if _, ok := kind.Lookup(v); !ok {
				return fail("unknown kind %q (known: %s)", v, strings.Join(Kinds(), ", "))
			}
			s.Kind = v
		case "where":
			s.Where = v
		case "dims":
			if s.Dims, err = strconv.Atoi(v); err != nil || s.Dims < 1 || s.Dims > MaxDims {
				return fail("dims=%s: want 1 to %d", v, MaxDims)
			}
		default:
			if s.Options == nil {
				s.Options = Options{}
			}
			s.Options[k] = v
		}
	}
	if s.Key == "" {
		return fail("key=KEYCOL is required (the table's primary key or replica identity)")
	}
	if s.Metric == 0 {
		return fail("metric=l2|cosine|ip is required")
	}
	k, err := kindOf(s)
	if err != nil {
		return fail("%v", err)
	}
	if err := k.Validate(s.Options); err != nil {
		return Spec{}, fmt.Errorf("--index %q: %w", def, err)
	}
	return s, nil
}

// MaxDims is the largest dimension accepted, as in pgvector.
const MaxDims = 16000

// ExactDistances reports whether the index's distances are exact: it
// keeps float vectors (store=float), so that knn can give each hit's xid
// for a client to skip reading that vector. False for a spec it cannot
// build.
func (s Spec) ExactDistances() bool {
	k, err := kindOf(s)
	if err != nil {
		return false
	}
	st, err := k.StoreOf(s.Options)
	return err == nil && st == store.Float
}

// QualifiedTable is schema.table, quoted for use in SQL.
func (s Spec) QualifiedTable() string { return QuoteIdent(s.Schema) + "." + QuoteIdent(s.Table) }

// String renders the spec in the --index grammar.
func (s Spec) String() string {
	out := fmt.Sprintf("%s=%s(%s) key=%s metric=%s kind=%s", s.Name, s.QualifiedTable(), QuoteIdent(s.Column), QuoteIdent(s.Key), s.Metric, s.Kind)
	if s.Dims > 0 {
		out += fmt.Sprintf(" dims=%d", s.Dims)
	}
	if s.Where != "" {
		out += " " + Options{"where": s.Where}.String()
	}
	if len(s.Options) > 0 {
		out += " " + s.Options.String()
	}
	return out
}

// QuoteIdent quotes a SQL identifier.
func QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// splitIdents splits a dotted SQL name into identifiers, folding unquoted
// ones to lower case.
func splitIdents(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	var out []string
	for len(s) > 0 {
		var id string
		if s[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quoted identifier")
			}
			id, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, '.')
			if end < 0 {
				end = len(s)
			}
			id, s = strings.ToLower(strings.TrimSpace(s[:end])), s[end:]
			if !unquotedIdent.MatchString(id) {
				return nil, fmt.Errorf("bad identifier %q", id)
			}
		}
		out = append(out, id)
		if len(s) > 0 {
			if s[0] != '.' || len(s) == 1 {
				return nil, fmt.Errorf("bad dotted name")
			}
			s = s[1:]
		}
	}
	return out, nil
}

package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// table is one source table and the indexes it feeds. Several indexes may
// read one table (two kinds to compare, or two vector columns); the table
// is copied once and every change is decoded once for all of them.
type table struct {
	schema, name string
	oid          uint32
	partitioned  bool
	key          string // the replica-identity column
	keyType      pgvalue.KeyType
	colTypes     map[string]columnType // published columns as last seen
	entries      []*indexer.Entry
	columns      []string // published: the key, then each distinct vector column
}

func (t *table) qualified() string {
	return indexer.QuoteIdent(t.schema) + "." + indexer.QuoteIdent(t.name)
}

// ErrNoReplicaIdentity: the key given for an index is not the table's
// replica identity, so changes cannot be matched to rows.
var ErrNoReplicaIdentity = errors.New("key is not the table's replica identity")

// resolveTables groups the entries by table and checks each table against
// the catalog: it exists, the key column is its replica identity, the
// column types are supported. It configures every entry with its types;
// an entry whose definition contradicts its column (dims=N on a
// vector(M)) is put into the error state and left out, and the others are
// served. Nothing is changed in the database.
func resolveTables(ctx context.Context, conn *pgx.Conn, entries []*indexer.Entry, log *slog.Logger) ([]*table, error) {
	var tables []*table
	byName := map[string]*table{}
	for _, e := range entries {
		spec := e.Spec()
		t := byName[spec.QualifiedTable()]
		if t == nil {
			t = &table{schema: spec.Schema, name: spec.Table, key: spec.Key}
			if err := t.resolve(ctx, conn); err != nil {
				return nil, err
			}
			byName[spec.QualifiedTable()] = t
			tables = append(tables, t)
		}
		if spec.Key != t.key {
			return nil, configError{fmt.Errorf("index %s: key=%s, but another index reads %s with key=%s", spec.Name, spec.Key, t.qualified(), t.key)}
		}
		vt, typmod, err := t.vectorColumn(ctx, conn, spec.Column)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", spec.Name, err)
		}
		if err := configure(e, t, vt, typmod); err != nil {
			failOnly(log, e, err)
			continue
		}
		t.entries = append(t.entries, e)
		if !slices.Contains(t.columns, spec.Column) {
			t.columns = append(t.columns, spec.Column)
		}
	}
	return slices.DeleteFunc(tables, func(t *table) bool { return len(t.entries) == 0 }), nil
}

// configure gives e the types of its columns. A dimension in its
// definition that contradicts the column's vector(n) is refused with what
// to change.
func configure(e *indexer.Entry, t *table, vt pgvalue.VectorType, dims int) error {
	spec := e.Spec()
	if spec.Dims > 0 && dims > 0 && spec.Dims != dims {
		return fmt.Errorf("index %s: dims=%d, but column %s of %s is vector(%d); set dims=%d or leave dims out, then restart vecside",
			spec.Name, spec.Dims, indexer.QuoteIdent(spec.Column), t.qualified(), dims, dims)
	}
	return e.Configure(t.keyType, vt, dims)
}

// failOnly puts e into the error state, and says so: the other indexes
// are served.
func failOnly(log *slog.Logger, e *indexer.Entry, err error) {
	e.Fail(err)
	log.Error("index cannot be served; the others are", "index", e.Spec().Name, "err", err)
}

func (t *table) resolve(ctx context.Context, conn *pgx.Conn) error {
	var relkind, replident string
	err := conn.QueryRow(ctx, `
		SELECT c.oid, c.relkind::text, c.relreplident::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, t.schema, t.name).Scan(&t.oid, &relkind, &replident)
	if errors.Is(err, pgx.ErrNoRows) {
		return configError{fmt.Errorf("table %s does not exist", t.qualified())}
	}
	if err != nil {
		return fmt.Errorf("looking up table %s: %w", t.qualified(), err)
	}
	if relkind != "r" && relkind != "p" {
		return configError{fmt.Errorf("%s is not a table (relkind %s)", t.qualified(), relkind)}
	}
	t.partitioned = relkind == "p"
	identity, err := replicaIdentity(ctx, conn, t.oid, replident)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.qualified(), err)
	}
	if len(identity) != 1 || identity[0] != t.key {
		how := fmt.Sprintf("give it a primary key on %[1]s, or ALTER TABLE %[2]s REPLICA IDENTITY USING INDEX <a unique index on (%[1]s)>", indexer.QuoteIdent(t.key), t.qualified())
		switch {
		case replident == "f":
			return configError{fmt.Errorf("%w: %s has REPLICA IDENTITY FULL, which would put every old vector in the WAL; %s", ErrNoReplicaIdentity, t.qualified(), how)}
		case len(identity) == 0:
			return configError{fmt.Errorf("%w: %s has no replica identity; %s", ErrNoReplicaIdentity, t.qualified(), how)}
		default:
			return configError{fmt.Errorf("%w: the replica identity of %s is (%s), not (%s); index by that key, or %s", ErrNoReplicaIdentity, t.qualified(), strings.Join(identity, ", "), t.key, how)}
		}
	}
	keyCol, err := lookupColumn(ctx, conn, t.oid, t.key)
	if err != nil {
		return fmt.Errorf("table %s: key column: %w", t.qualified(), err)
	}
	t.keyType, err = pgvalue.KeyTypeForOID(keyCol.oid)
	if err != nil {
		return configError{fmt.Errorf("table %s: %w", t.qualified(), err)}
	}
	t.columns = []string{t.key}
	t.colTypes = map[string]columnType{t.key: keyCol}
	return nil
}

// columnType is a column's type OID, name and modifier: what a Relation
// message must still show for the index to remain valid.
type columnType struct {
	oid    uint32
	name   string
	typmod int32
}

func lookupColumn(ctx context.Context, conn *pgx.Conn, tableOID uint32, column string) (columnType, error) {
	var c columnType
	err := conn.QueryRow(ctx, `
		SELECT a.atttypid, t.typname, a.atttypmod
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1 AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, tableOID, column).Scan(&c.oid, &c.name, &c.typmod)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, configError{fmt.Errorf("column %s does not exist", indexer.QuoteIdent(column))}
	}
	return c, err
}

// replicaIdentity lists the columns of the table's replica identity: its
// primary key by default, the chosen index for USING INDEX, none for
// NOTHING or FULL (FULL is refused by the caller).
func replicaIdentity(ctx context.Context, conn *pgx.Conn, oid uint32, replident string) ([]string, error) {
	var cond string
	switch replident {
	case "d":
		cond = "i.indisprimary"
	case "i":
		cond = "i.indisreplident"
	default:
		return nil, nil
	}
	rows, err := conn.Query(ctx, `
		SELECT a.attname
		FROM pg_index i
		JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1 AND `+cond+`
		ORDER BY k.ord`, oid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// vectorColumn returns the type of an indexed column and the dimension its
// type modifier fixes (vector(n)), or 0, and records it in t.colTypes.
func (t *table) vectorColumn(ctx context.Context, conn *pgx.Conn, column string) (pgvalue.VectorType, int, error) {
	c, err := lookupColumn(ctx, conn, t.oid, column)
	if err != nil {
		return 0, 0, err
	}
	vt, err := pgvalue.VectorTypeFor(c.oid, c.name)
	if err != nil {
		return 0, 0, configError{fmt.Errorf("column %s: %w", indexer.QuoteIdent(column), err)}
	}
	t.colTypes[column] = c
	return vt, typmodDims(vt, c.typmod), nil
}

// typmodDims is the dimension a column's type modifier fixes: n for
// vector(n); arrays carry none.
func typmodDims(vt pgvalue.VectorType, typmod int32) int {
	if vt == pgvalue.VectorPgvector && typmod > 0 {
		return int(typmod)
	}
	return 0
}

// ensurePublication creates the publication or brings its tables and
// column lists up to date. It runs before the slot is created: a slot
// decoding with a publication that does not exist yet fails or loses
// changes.
func ensurePublication(ctx context.Context, conn *pgx.Conn, name string, tables []*table) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	pub := indexer.QuoteIdent(name)
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE PUBLICATION "+pub+" WITH (publish_via_partition_root = true)"); err != nil {
			return refused(fmt.Errorf("creating publication %s: %w", name, err))
		}
	}
	for _, t := range tables {
		var published []string
		err := tx.QueryRow(ctx, `SELECT attnames FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`, name, t.schema, t.name).Scan(&published)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case sameSet(published, t.columns):
			continue
		default:
			if _, err := tx.Exec(ctx, "ALTER PUBLICATION "+pub+" DROP TABLE "+t.qualified()); err != nil {
				return refused(fmt.Errorf("publication %s: %w", name, err))
			}
		}
		cols := make([]string, len(t.columns))
		for i, c := range t.columns {
			cols[i] = indexer.QuoteIdent(c)
		}
		if _, err := tx.Exec(ctx, "ALTER PUBLICATION "+pub+" ADD TABLE "+t.qualified()+" ("+strings.Join(cols, ", ")+")"); err != nil {
			return refused(fmt.Errorf("adding %s to publication %s (needs ownership of the table): %w", t.qualified(), name, err))
		}
	}
	return tx.Commit(ctx)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// refused marks err as final when Postgres refused the statement for a
// reason retrying cannot change (class 42: privileges, missing or
// conflicting objects); connection failures stay retryable.
func refused(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "42") {
		return configError{err}
	}
	return err
}

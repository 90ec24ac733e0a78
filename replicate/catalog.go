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
//
// Its columns are known by their attribute numbers, which a rename keeps:
// the indexes follow renames of their columns (see column).
type table struct {
	schema, name string
	oid          uint32
	partitioned  bool
	key          *column // the replica-identity column
	keyType      pgvalue.KeyType
	vectors      map[string]*column // the indexed columns, by the names the index definitions give
	published    []*column          // the key and the vector columns, by attribute number
	columns      []string           // what a copy selects: the key, then each vector column
	listed       listing            // the table's entry in the publication when it was resolved
	// followed: the indexes followed this table before (see binding), so
	// a column name that is gone was renamed, not mistyped.
	followed bool
	// where is the row filter of the table's indexes (indexer.Spec.Where):
	// the publication's, the copy's and a repair read's.
	where   string
	entries []Index
}

// filter appends the table's row filter to a WHERE clause (which may be
// empty).
func (t *table) filter(where string) string {
	switch {
	case t.where == "":
		return where
	case where == "":
		return " WHERE (" + t.where + ")"
	}
	return where + " AND (" + t.where + ")"
}

// column is a column the indexes read. Its name is the one it had when
// the table was resolved: SQL issued then (a copy) uses it, SQL issued
// later (a repair read) asks the catalog for the name of attnum anew.
type column struct {
	attnum int16
	name   string
	typ    columnType
	vt     pgvalue.VectorType // for a vector column
}

func (t *table) qualified() string {
	return indexer.QuoteIdent(t.schema) + "." + indexer.QuoteIdent(t.name)
}

// ErrNoReplicaIdentity: the key given for an index is not the table's
// replica identity, so changes cannot be matched to rows.
var ErrNoReplicaIdentity = errors.New("key is not the table's replica identity")

// errNoColumn: no column of the table has the name or number asked for.
var errNoColumn = errors.New("no such column")

// resolveTables groups the entries by table and checks each table against
// the catalog: it exists, the key column is its replica identity, the
// column types are supported. It configures every entry with its types.
// A table that cannot be served is left out with its entries and the
// reason, in unresolved; an entry whose definition contradicts its column
// (dims=N on a vector(M)) is put into the error state and left out. The
// others are served. Nothing is changed in the database.
func resolveTables(ctx context.Context, conn *pgx.Conn, pub string, entries []Index, bound func(Index) binding, log *slog.Logger) (tables []*table, unresolved []unresolvedTable, err error) {
	var order []string
	byTable := map[string][]Index{}
	for _, e := range entries {
		q, err := tableOf(ctx, conn, e, bound(e))
		if err != nil {
			return nil, nil, err
		}
		if byTable[q] == nil {
			order = append(order, q)
		}
		byTable[q] = append(byTable[q], e)
	}
	for _, q := range order {
		group := byTable[q]
		// Resolved as the entry bound to the table is, if one is.
		first := slices.IndexFunc(group, func(e Index) bool { return bound(e).live != 0 })
		t, err := resolveTable(ctx, conn, pub, group, bound(group[max(first, 0)]), log)
		switch {
		case errors.As(err, new(configError)):
			unresolved = append(unresolved, unresolvedTable{group[0].Spec().QualifiedTable(), group, err})
		case err != nil:
			return nil, nil, err
		case len(t.entries) > 0:
			tables = append(tables, t)
		}
	}
	return tables, unresolved, nil
}

// tableOf says which table e reads, to group the entries that read one:
// the OID lookupTable finds for it, else its definition's name. Two
// entries whose definitions name one table may read two: one bound to the
// table renamed since, one new, of a table created under the old name.
func tableOf(ctx context.Context, conn *pgx.Conn, e Index, b binding) (string, error) {
	s := e.Spec()
	found, err := lookupTable(ctx, conn, s.Schema, s.Table, b.live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "name " + s.QualifiedTable(), nil
	case err != nil:
		return "", fmt.Errorf("looking up table %s: %w", s.QualifiedTable(), err)
	}
	return fmt.Sprint("oid ", found.oid), nil
}

// foundTable is a relation lookupTable found.
type foundTable struct {
	oid                              uint32
	relkind, replident, schema, name string
}

// lookupTable finds the table an index reads: the one of OID bound (0:
// none) while it exists, renamed or not, else the relation named
// schema.name; pgx.ErrNoRows when there is neither.
func lookupTable(ctx context.Context, conn *pgx.Conn, schema, name string, bound uint32) (foundTable, error) {
	var f foundTable
	err := conn.QueryRow(ctx, `
		SELECT c.oid, c.relkind::text, c.relreplident::text, n.nspname, c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE (c.oid = $3 AND c.relkind IN ('r', 'p')) OR (n.nspname = $1 AND c.relname = $2)
		ORDER BY c.oid = $3 DESC LIMIT 1`, schema, name, bound).Scan(&f.oid, &f.relkind, &f.replident, &f.schema, &f.name)
	return f, err
}

// unresolvedTable is a table that its entries cannot be served from, and
// why: it does not exist (errNoTable), or its definition or the catalog
// is wrong, which retrying cannot change.
type unresolvedTable struct {
	qualified string
	entries   []Index
	err       error
}

// errNoTable: no table has the name an index definition gives.
var errNoTable = errors.New("table does not exist")

// binding is what is known of the table an index followed before: the
// OID it is bound to in this process (live), and the one its checkpoint
// records; 0 for none.
type binding struct{ live, checkpoint uint32 }

// resolveTable resolves the table that entries read, and configures them.
func resolveTable(ctx context.Context, conn *pgx.Conn, pub string, entries []Index, b binding, log *slog.Logger) (*table, error) {
	specs := make([]indexer.Spec, len(entries))
	for i, e := range entries {
		specs[i] = e.Spec()
		if specs[i].Key != specs[0].Key {
			return nil, configError{fmt.Errorf("index %s: key=%s, but another index reads %s with key=%s", specs[i].Name, specs[i].Key, specs[0].QualifiedTable(), specs[0].Key)}
		}
		if specs[i].Where != specs[0].Where {
			return nil, configError{fmt.Errorf("index %s: where=%q, but another index reads %s with where=%q: a publication holds one row filter per table", specs[i].Name, specs[i].Where, specs[0].QualifiedTable(), specs[0].Where)}
		}
	}
	t := &table{schema: specs[0].Schema, name: specs[0].Table, where: specs[0].Where}
	if err := t.resolve(ctx, conn, pub, specs[0].Key, b, log); err != nil {
		return nil, err
	}
	if err := t.resolveColumns(ctx, conn, specs, log); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := t.configure(e); err != nil {
			failOnly(log, e, err)
			continue
		}
		t.entries = append(t.entries, e)
	}
	return t, nil
}

// failOnly puts e into the error state, and says so: the other indexes
// are served.
func failOnly(log *slog.Logger, e Index, err error) {
	e.Fail(err)
	log.Error("index cannot be served; the others are", "index", e.Spec().Name, "err", err)
}

// resolve looks the table up and finds its key column: the one named key,
// or, when no column has that name any more and the indexes followed this
// table before (b), the table's replica identity if the publication lists
// it: the key was renamed since vecside published it. Without that
// evidence a name that is not there is a mistake in the definition, said
// as such. A table the indexes are bound to in this process is found by
// its OID first: renamed, it is still theirs, and a table created under
// its old name is another.
func (t *table) resolve(ctx context.Context, conn *pgx.Conn, pub, key string, b binding, log *slog.Logger) error {
	found, err := lookupTable(ctx, conn, t.schema, t.name, b.live)
	t.oid = found.oid
	if err == nil && (found.schema != t.schema || found.name != t.name) {
		log.Info("following the renamed table", "oid", t.oid, "was", t.schema+"."+t.name, "now", found.schema+"."+found.name)
		t.schema, t.name = found.schema, found.name
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return configError{fmt.Errorf("%w: %s", errNoTable, t.qualified())}
	}
	if err != nil {
		return fmt.Errorf("looking up table %s: %w", t.qualified(), err)
	}
	if found.relkind != "r" && found.relkind != "p" {
		return configError{fmt.Errorf("%s is not a table (relkind %s)", t.qualified(), found.relkind)}
	}
	t.partitioned = found.relkind == "p"
	t.followed = t.oid == b.live || t.oid == b.checkpoint
	if t.listed, err = readListing(ctx, conn, pub, t.oid); err != nil {
		return fmt.Errorf("table %s: %w", t.qualified(), err)
	}
	identity, err := replicaIdentity(ctx, conn, t.oid, found.replident)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.qualified(), err)
	}
	t.key, err = lookupColumn(ctx, conn, t.oid, "attname", key)
	if errors.Is(err, errNoColumn) && t.followed && len(identity) == 1 && t.listed.has(identity[0].attnum) {
		t.key, err = identity[0], nil
		log.Info("following the renamed key column", "table", t.qualified(), "was", key, "now", t.key.name)
	}
	if err != nil && !errors.Is(err, errNoColumn) {
		return fmt.Errorf("table %s: key column: %w", t.qualified(), err)
	}
	if t.key == nil || len(identity) != 1 || identity[0].attnum != t.key.attnum {
		return noReplicaIdentity(t.qualified(), key, found.replident, identity)
	}
	t.keyType, err = pgvalue.KeyTypeForOID(t.key.typ.oid)
	if err != nil {
		return configError{fmt.Errorf("table %s: %w", t.qualified(), err)}
	}
	t.published = []*column{t.key}
	return nil
}

// noReplicaIdentity says why key is not the replica identity of the table
// and how to make it so.
func noReplicaIdentity(table, key, replident string, identity []*column) error {
	how := fmt.Sprintf("give it a primary key on %[1]s, or ALTER TABLE %[2]s REPLICA IDENTITY USING INDEX <a unique index on (%[1]s)>", indexer.QuoteIdent(key), table)
	switch {
	case replident == "f":
		return configError{fmt.Errorf("%w: %s has REPLICA IDENTITY FULL, which would put every old vector in the WAL; %s", ErrNoReplicaIdentity, table, how)}
	case len(identity) == 0:
		return configError{fmt.Errorf("%w: %s has no replica identity; %s", ErrNoReplicaIdentity, table, how)}
	}
	names := make([]string, len(identity))
	for i, c := range identity {
		names[i] = c.name
	}
	return configError{fmt.Errorf("%w: the replica identity of %s is (%s), not (%s); index by that key, or %s", ErrNoReplicaIdentity, table, strings.Join(names, ", "), key, how)}
}

// resolveColumns finds the vector column each definition names: by that
// name, or, when no column has it any more, the one column the publication
// lists that neither the key nor another definition accounts for: it was
// renamed since vecside published it. It records their types, and what a
// copy selects.
func (t *table) resolveColumns(ctx context.Context, conn *pgx.Conn, specs []indexer.Spec, log *slog.Logger) error {
	t.vectors = map[string]*column{}
	var missing []indexer.Spec
	for _, s := range specs {
		if _, done := t.vectors[s.Column]; done || slices.ContainsFunc(missing, func(m indexer.Spec) bool { return m.Column == s.Column }) {
			continue
		}
		c, err := lookupColumn(ctx, conn, t.oid, "attname", s.Column)
		if errors.Is(err, errNoColumn) {
			missing = append(missing, s)
			continue
		}
		if err != nil {
			return fmt.Errorf("index %s: %w", s.Name, err)
		}
		t.vectors[s.Column] = t.adopt(c)
	}
	if len(missing) > 0 {
		c, err := t.renamedColumn(ctx, conn, missing)
		if err != nil {
			return err
		}
		log.Info("following a renamed column", "table", t.qualified(), "was", missing[0].Column, "now", c.name)
		t.vectors[missing[0].Column] = t.adopt(c)
	}
	t.columns = make([]string, len(t.published))
	for i, c := range t.published {
		t.columns[i] = c.name
	}
	for _, s := range specs {
		c := t.vectors[s.Column]
		vt, err := pgvalue.VectorTypeFor(c.typ.oid, c.typ.name)
		if err != nil {
			return configError{fmt.Errorf("index %s: column %s: %w", s.Name, indexer.QuoteIdent(c.name), err)}
		}
		c.vt = vt
	}
	slices.SortFunc(t.published, func(a, b *column) int { return int(a.attnum) - int(b.attnum) })
	return nil
}

// adopt records c among the published columns, or returns the one
// recorded under its attribute number already.
func (t *table) adopt(c *column) *column {
	for _, p := range t.published {
		if p.attnum == c.attnum {
			return p
		}
	}
	t.published = append(t.published, c)
	return c
}

// renamedColumn is the column that the one definition in missing names,
// when no column has that name: the one the publication lists beside those
// accounted for, if the indexes followed the table before. With more
// names missing, or no such column, which is which cannot be told; for a
// table not followed before, the name is a mistake, and the error lists
// the table's vector columns.
func (t *table) renamedColumn(ctx context.Context, conn *pgx.Conn, missing []indexer.Spec) (*column, error) {
	var spare []int16
	for _, n := range t.listed.attnums {
		if !slices.ContainsFunc(t.published, func(c *column) bool { return c.attnum == n }) {
			spare = append(spare, n)
		}
	}
	if !t.followed || len(missing) != 1 || len(spare) != 1 {
		err := fmt.Errorf("index %s: column %s of %s does not exist", missing[0].Name, indexer.QuoteIdent(missing[0].Column), t.qualified())
		names, lerr := vectorColumns(ctx, conn, t.oid)
		switch {
		case lerr != nil:
			return nil, lerr
		case len(names) > 0:
			err = fmt.Errorf("%w; its vector columns: %s", err, strings.Join(names, ", "))
		}
		return nil, configError{err}
	}
	return lookupColumn(ctx, conn, t.oid, "attnum", spare[0])
}

// vectorColumns lists the columns of table oid whose type vecside
// indexes: what a definition that names no column of the table meant.
func vectorColumns(ctx context.Context, conn *pgx.Conn, oid uint32) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, err
	}
	var names []string
	var name, typname string
	var typ uint32
	_, err = pgx.ForEachRow(rows, []any{&name, &typ, &typname}, func() error {
		if _, err := pgvalue.VectorTypeFor(typ, typname); err == nil {
			names = append(names, indexer.QuoteIdent(name))
		}
		return nil
	})
	return names, err
}

// configure gives e the types of its columns. A dimension in its
// definition that contradicts the column's vector(n) or halfvec(n) is
// refused with what to change.
func (t *table) configure(e Index) error {
	dims, err := t.dims(e.Spec())
	if err != nil {
		return err
	}
	c := t.vectors[e.Spec().Column]
	return e.Configure(t.keyType, c.vt, dims)
}

// dims is the dimension that spec's column fixes (0 for none), or an
// error if spec's dims= contradicts it.
func (t *table) dims(spec indexer.Spec) (int, error) {
	c := t.vectors[spec.Column]
	dims := c.vt.TypmodDims(c.typ.typmod)
	if spec.Dims > 0 && dims > 0 && spec.Dims != dims {
		return 0, fmt.Errorf("index %s: dims=%d, but column %s of %s is %s(%d); set dims=%d or leave dims out, then restart vecside",
			spec.Name, spec.Dims, indexer.QuoteIdent(c.name), t.qualified(), c.vt, dims, dims)
	}
	return dims, nil
}

// columnIndex is the position in a copy's rows of the column that
// definitions name column.
func (t *table) columnIndex(column string) int {
	return slices.Index(t.columns, t.vectors[column].name)
}

// unpublished lists the entries whose key or vector column the publication
// did not list when the table was resolved: their changes since may never
// have been sent.
func (t *table) unpublished() []Index {
	var out []Index
	for _, e := range t.entries {
		if !t.listed.has(t.key.attnum) || !t.listed.has(t.vectors[e.Spec().Column].attnum) {
			out = append(out, e)
		}
	}
	return out
}

// columnType is a column's type OID, name and modifier: what a Relation
// message must still show for the index to remain valid.
type columnType struct {
	oid    uint32
	name   string
	typmod int32
}

// lookupColumn finds a live column of a table by attname or attnum (by).
func lookupColumn(ctx context.Context, conn *pgx.Conn, tableOID uint32, by string, value any) (*column, error) {
	c := &column{}
	err := conn.QueryRow(ctx, `
		SELECT a.attnum, a.attname, a.atttypid, t.typname, a.atttypmod
		FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1 AND a.`+by+` = $2 AND a.attnum > 0 AND NOT a.attisdropped`, tableOID, value).
		Scan(&c.attnum, &c.name, &c.typ.oid, &c.typ.name, &c.typ.typmod)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %v", errNoColumn, value)
	}
	return c, err
}

// replicaIdentity lists the columns of the table's replica identity: its
// primary key by default, the chosen index for USING INDEX, none for
// NOTHING or FULL (FULL is refused by the caller).
func replicaIdentity(ctx context.Context, conn *pgx.Conn, oid uint32, replident string) ([]*column, error) {
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
		SELECT a.attnum, a.attname, a.atttypid, t.typname, a.atttypmod
		FROM pg_index i
		JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		JOIN pg_type t ON t.oid = a.atttypid
		WHERE i.indrelid = $1 AND `+cond+`
		ORDER BY k.ord`, oid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*column, error) {
		c := &column{}
		err := row.Scan(&c.attnum, &c.name, &c.typ.oid, &c.typ.name, &c.typ.typmod)
		return c, err
	})
}

// listing is a table's entry in the publication: whether it is there, and
// the attribute numbers its column list holds (nil: every column).
type listing struct {
	found   bool
	attnums []int16
}

func (l listing) has(attnum int16) bool {
	return l.found && (l.attnums == nil || slices.Contains(l.attnums, attnum))
}

// readListing reads the table's entry in publication pub. Column lists
// hold attribute numbers, so they follow renames.
func readListing(ctx context.Context, conn *pgx.Conn, pub string, oid uint32) (listing, error) {
	l := listing{found: true}
	err := conn.QueryRow(ctx, `
		SELECT pr.prattrs::int2[] FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
		WHERE p.pubname = $1 AND pr.prrelid = $2`, pub, oid).Scan(&l.attnums)
	if errors.Is(err, pgx.ErrNoRows) {
		return listing{}, nil
	}
	if err != nil {
		return l, fmt.Errorf("reading publication %s: %w", pub, err)
	}
	return l, nil
}

// ensurePublication creates the publication, marked as vecside's, or
// brings its tables and column lists up to date; own is what claim found.
// It runs before the slot is created: a slot decoding with a publication
// that does not exist yet fails or loses changes. A table that Postgres
// refuses to publish (only its owner may: a publicationRefused) or whose
// row filter would break the application's writes (a configError) is left
// as it was, with the reason in refused.
func ensurePublication(ctx context.Context, conn *pgx.Conn, name string, tables []*table, own ownership) (refused map[*table]error, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	pub := indexer.QuoteIdent(name)
	if !own.publication {
		if _, err := tx.Exec(ctx, "CREATE PUBLICATION "+pub+" WITH (publish_via_partition_root = true)"); err != nil {
			return nil, refusal(fmt.Errorf("creating publication %s: %w", name, err))
		}
	}
	// An older vecside's publication, adopted, is marked as a new one is.
	if !own.publication || own.adopt {
		if _, err := tx.Exec(ctx, "COMMENT ON PUBLICATION "+pub+" IS '"+Mark+"'"); err != nil {
			return nil, refusal(fmt.Errorf("replicate: marking publication %s as vecside's: %w", name, err))
		}
	}
	refused = map[*table]error{}
	for _, t := range tables {
		err := publishTable(ctx, tx, name, t)
		if errors.As(err, new(configError)) || errors.As(err, new(publicationRefused)) {
			refused[t] = err
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return refused, tx.Commit(ctx)
}

// publicationRefused: Postgres refused to put a table into the
// publication (only the table's owner may); fix is what its owner or a
// superuser runs to do it.
type publicationRefused struct {
	fix string
	err error
}

func (e publicationRefused) Error() string { return e.err.Error() }
func (e publicationRefused) Unwrap() error { return e.err }

// publishTable puts t into publication name with its columns and row
// filter, in a savepoint, unless it is there already.
func publishTable(ctx context.Context, tx pgx.Tx, name string, t *table) error {
	var published []string
	var rowFilter *string
	err := tx.QueryRow(ctx, `SELECT attnames, rowfilter FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`, name, t.schema, t.name).Scan(&published, &rowFilter)
	listed := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if listed && sameSet(published, t.columns) && (rowFilter == nil) == (t.where == "") {
		same := rowFilter == nil
		if !same {
			if same, err = sameRowFilter(ctx, tx, t, *rowFilter); err != nil {
				return err
			}
		}
		if same {
			return nil
		}
	}
	pub := indexer.QuoteIdent(name)
	var stmts []string
	if listed {
		stmts = append(stmts, "ALTER PUBLICATION "+pub+" DROP TABLE "+t.qualified())
	}
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = indexer.QuoteIdent(c)
	}
	add := "ALTER PUBLICATION " + pub + " ADD TABLE " + t.qualified() + " (" + strings.Join(cols, ", ") + ")"
	if t.where != "" {
		add += " WHERE (" + t.where + ")"
	}
	stmts = append(stmts, add)
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	defer sp.Rollback(ctx)
	for _, stmt := range stmts {
		if _, err := sp.Exec(ctx, stmt); err != nil {
			err = fmt.Errorf("publishing %s in %s (needs ownership of the table): %w", t.qualified(), name, err)
			if errors.As(refusal(err), new(configError)) {
				return publicationRefused{strings.Join(stmts, "; "), err}
			}
			return err
		}
	}
	if err := checkRowFilter(ctx, sp, t); err != nil {
		return err
	}
	return sp.Commit(ctx)
}

// sameRowFilter reports whether filter, a row filter as Postgres shows it
// (deparsed), is t.where. Postgres deparses t.where alike as the check
// constraint of a temporary table with t's columns, made in a savepoint
// that is rolled back. A table whose filter is the same is left in the
// publication: a role that does not own it, whose publication a superuser
// made, could not add it anew. A where= that makes no check constraint
// is reported as not the same.
func sameRowFilter(ctx context.Context, tx pgx.Tx, t *table, filter string) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer sp.Rollback(ctx)
	if _, err := sp.Exec(ctx, "CREATE TEMP TABLE vecside_row_filter (LIKE "+t.qualified()+"); ALTER TABLE vecside_row_filter ADD CHECK ("+t.where+")"); err != nil {
		return false, nil
	}
	var deparsed string
	if err := sp.QueryRow(ctx, `SELECT pg_get_expr(conbin, conrelid) FROM pg_constraint WHERE conrelid = 'vecside_row_filter'::regclass AND contype = 'c'`).Scan(&deparsed); err != nil {
		return false, err
	}
	return deparsed == filter, nil
}

// checkRowFilter refuses a row filter that would make the application's
// UPDATEs and DELETEs of the table fail: PostgreSQL requires the columns
// it reads to be in the replica identity, and checks it only when a row
// is changed. An UPDATE and a DELETE of no row run the same check.
func checkRowFilter(ctx context.Context, tx pgx.Tx, t *table) error {
	if t.where == "" {
		return nil
	}
	key := indexer.QuoteIdent(t.key.name)
	for _, sql := range []string{"UPDATE " + t.qualified() + " SET " + key + " = " + key + " WHERE false", "DELETE FROM " + t.qualified() + " WHERE false"} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return configError{fmt.Errorf("where=%q on %s: %w (a row filter may read only the replica-identity columns: %s)", t.where, t.qualified(), err, t.key.name)}
		}
	}
	return nil
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

// refusal marks err as final when Postgres refused the statement for a
// reason retrying cannot change (class 42: privileges, missing or
// conflicting objects); connection failures stay retryable.
func refusal(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "42") {
		return configError{err}
	}
	return err
}

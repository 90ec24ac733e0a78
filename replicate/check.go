package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Level grades a finding of Check.
type Level int

const (
	// OK: the check passed.
	OK Level = iota
	// Warn: a risk that does not prevent operation.
	Warn
	// Fail: vecside cannot run until this is fixed.
	Fail
)

func (l Level) String() string { return [...]string{"ok", "warn", "FAIL"}[l] }

// Finding is the outcome of one pre-flight check, with the fix when it
// did not pass.
type Finding struct {
	Level  Level
	Check  string
	Detail string
	Fix    string
}

// minMinor is the oldest minor release vecside accepts per major version:
// each includes the logical-decoding fixes (lost or misattributed
// changes after catalog invalidations, slot and snapshot races) that the
// releases before it lacked.
var minMinor = map[int]int{15: 8, 16: 4, 17: 0}

// Check runs the pre-flight checks for following specs' tables from
// source with a publication and slot named name. It changes nothing.
func Check(ctx context.Context, source, name string, specs []indexer.Spec) ([]Finding, error) {
	conn, err := pgx.Connect(ctx, source)
	if err != nil {
		return nil, fmt.Errorf("connecting to --source: %w", err)
	}
	defer conn.Close(context.Background())
	c := checker{ctx: ctx, conn: conn, name: name}
	c.version()
	c.setting("wal_level", func(v string) (Level, string, string) {
		if v != "logical" {
			return Fail, "wal_level is " + v, "set wal_level = logical in postgresql.conf and restart Postgres"
		}
		return OK, "logical", ""
	})
	c.role()
	c.capacity()
	c.setting("max_slot_wal_keep_size", func(v string) (Level, string, string) {
		if v == "-1" {
			return Warn, "unlimited: a stopped sidecar makes Postgres keep WAL until the disk fills",
				"set max_slot_wal_keep_size (e.g. '50GB') so a stalled slot is invalidated instead"
		}
		return OK, v + " MB", ""
	})
	if c.claim(specs) {
		c.slot()
		c.publication(specs)
	}
	for _, s := range specs {
		c.table(s)
	}
	return c.findings, c.err
}

type checker struct {
	ctx      context.Context
	conn     *pgx.Conn
	name     string
	user     string // the role the checks run as, quoted
	findings []Finding
	err      error
	// published: the publication exists and is vecside's.
	published bool
}

func (c *checker) add(level Level, check, detail, fix string) {
	c.findings = append(c.findings, Finding{level, check, detail, fix})
}

// query runs a one-row query; a failure is kept and ends the checks'
// usefulness, so later calls do nothing.
func (c *checker) query(sql string, args []any, dest ...any) bool {
	if c.err != nil {
		return false
	}
	if err := c.conn.QueryRow(c.ctx, sql, args...).Scan(dest...); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.err = fmt.Errorf("%s: %w", strings.Fields(sql)[0], err)
		return false
	} else if err != nil {
		return false
	}
	return true
}

func (c *checker) version() {
	var num int
	if !c.query(`SELECT current_setting('server_version_num')::int`, nil, &num) {
		return
	}
	major, minor := num/10000, num%10000
	version := fmt.Sprintf("%d.%d", major, minor)
	switch want, known := minMinor[major]; {
	case major < 15:
		c.add(Fail, "server version", version+": publication column lists need PostgreSQL 15", "upgrade to PostgreSQL 15 or later")
	case known && minor < want:
		c.add(Fail, "server version", version+" lacks logical-replication fixes", fmt.Sprintf("upgrade to %d.%d or later", major, want))
	default:
		c.add(OK, "server version", version, "")
	}
}

func (c *checker) setting(name string, judge func(string) (Level, string, string)) {
	var v string
	if c.query(`SELECT setting FROM pg_settings WHERE name = $1`, []any{name}, &v) {
		level, detail, fix := judge(v)
		c.add(level, name, detail, fix)
	}
}

func (c *checker) role() {
	var user string
	var repl, super bool
	if !c.query(`SELECT rolname, rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user`, nil, &user, &repl, &super) {
		return
	}
	c.user = indexer.QuoteIdent(user)
	if !repl && !super {
		c.add(Fail, "REPLICATION attribute", "role "+user+" cannot open replication connections", "ALTER ROLE "+c.user+" REPLICATION")
		return
	}
	c.add(OK, "REPLICATION attribute", "role "+user, "")
}

// capacity checks that one more slot and one more sender fit, unless the
// slot exists already.
func (c *checker) capacity() {
	var slots, maxSlots, senders, maxSenders int
	var ours bool
	if !c.query(`SELECT (SELECT count(*) FROM pg_replication_slots)::int,
			current_setting('max_replication_slots')::int,
			(SELECT count(*) FROM pg_stat_replication)::int,
			current_setting('max_wal_senders')::int,
			EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND `+ourSlot+`)`, []any{c.name},
		&slots, &maxSlots, &senders, &maxSenders, &ours) {
		return
	}
	// A table sync needs a temporary slot and a sender of its own, beside
	// the sidecar's.
	needSlots, needSenders := 2, 2
	if ours {
		needSlots = 1
	}
	detail := fmt.Sprintf("%d of %d slots and %d of %d senders in use", slots, maxSlots, senders, maxSenders)
	if slots+needSlots > maxSlots || senders+needSenders > maxSenders {
		c.add(Fail, "slots and senders", detail, fmt.Sprintf("raise max_replication_slots and max_wal_senders (restart) to leave room for %d more of each", needSenders))
		return
	}
	c.add(OK, "slots and senders", detail, "")
}

// claim reports, as failures, a slot or publication of the name that is
// not vecside's, which serve and teardown would refuse; it returns whether
// both are vecside's or do not exist.
func (c *checker) claim(specs []indexer.Spec) bool {
	if c.err != nil {
		return false
	}
	_, err := claim(c.ctx, c.conn, c.name, specs)
	if err == nil {
		return true
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var foreign *foreignError
		if !errors.As(e, &foreign) {
			c.err = err
			return false
		}
		c.add(Fail, foreign.object, foreign.owner, foreign.fix)
	}
	return false
}

func (c *checker) slot() {
	var status, app, client *string
	var active bool
	var xminAge, pid *int64
	if !c.query(`SELECT s.wal_status, s.active, age(s.catalog_xmin)::bigint, s.active_pid::bigint, r.application_name, coalesce(host(r.client_addr), 'a local socket')
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = $1`,
		[]any{c.name}, &status, &active, &xminAge, &pid, &app, &client) {
		if c.err == nil {
			c.add(OK, "slot "+c.name, "does not exist yet: serve creates it", "")
		}
		return
	}
	switch {
	case status != nil && *status == "lost":
		c.add(Fail, "slot "+c.name, "invalidated: it can no longer give changes",
			"run vecside teardown --name "+c.name+", or serve with --on-slot-lost=resync")
	// A running sidecar holds its slot: that is the one being checked,
	// unless two were started with one --name, which the second's log
	// says.
	case active && deref(app) == replicationApp:
		c.add(OK, "slot "+c.name, fmt.Sprintf("in use by a running vecside (pid %d, from %s), wal_status %s", deref(pid), deref(client), deref(status)), "")
	case active:
		c.add(Warn, "slot "+c.name, fmt.Sprintf("in use by another program (pid %d, application_name %q, from %s)", deref(pid), deref(app), deref(client)),
			"stop the other consumer: a slot has one consumer at a time")
	default:
		c.add(OK, "slot "+c.name, fmt.Sprintf("wal_status %s, catalog_xmin age %d", deref(status), deref(xminAge)), "")
	}
}

// publication checks that the publication is the sidecar's role's, or
// that serve can create it: with CREATE on the database and ownership of
// every table, which PostgreSQL requires to add one to a publication.
// Otherwise its fix is what a superuser runs to create it for the role.
func (c *checker) publication(specs []indexer.Spec) {
	check, pub := "publication "+c.name, indexer.QuoteIdent(c.name)
	var owner, database string
	var mine, canCreate bool
	var notOwned []string
	found := c.query(`SELECT pg_get_userbyid(pubowner), pg_has_role(pubowner, 'USAGE') FROM pg_publication WHERE pubname = $1`, []any{c.name}, &owner, &mine)
	tables, _ := publishedColumns(specs)
	if !c.query(`SELECT current_database(), has_database_privilege(current_database(), 'CREATE'),
			coalesce(array_agg(n ORDER BY n) FILTER (WHERE NOT pg_has_role(c.relowner, 'USAGE')), '{}')
		FROM (SELECT) one LEFT JOIN unnest($1::text[]) n ON true LEFT JOIN pg_class c ON c.oid = to_regclass(n)`,
		[]any{tables}, &database, &canCreate, &notOwned) {
		return
	}
	c.published = found
	create := "as a superuser: " + publicationSQL(c.name, c.user, specs)
	switch {
	case found && !mine:
		c.add(Fail, check, "owned by "+owner, "as a superuser: ALTER PUBLICATION "+pub+" OWNER TO "+c.user)
	case found:
		c.add(OK, check, "owned by "+owner, "")
	case len(notOwned) > 0:
		c.add(Fail, check, "does not exist yet, and serve cannot create it: only a table's owner can add it to a publication, and "+c.user+" does not own "+strings.Join(notOwned, ", "), create)
	case !canCreate:
		c.add(Fail, check, "does not exist yet, and serve cannot create it: "+c.user+" has no CREATE on database "+database,
			"GRANT CREATE ON DATABASE "+indexer.QuoteIdent(database)+" TO "+c.user+", or "+create)
	default:
		c.add(OK, check, "does not exist yet: serve creates it", "")
	}
}

// publishedColumns lists the tables that specs read, quoted and
// qualified, and for each the columns its indexes read: the key first.
func publishedColumns(specs []indexer.Spec) ([]string, map[string][]string) {
	var tables []string
	columns := map[string][]string{}
	for _, s := range specs {
		t := s.QualifiedTable()
		if columns[t] == nil {
			tables = append(tables, t)
			columns[t] = []string{s.Key}
		}
		if !slices.Contains(columns[t], s.Column) {
			columns[t] = append(columns[t], s.Column)
		}
	}
	return tables, columns
}

// publicationSQL is what creates publication name for specs as serve
// would, marked as vecside's, and gives it to role (quoted).
func publicationSQL(name, role string, specs []indexer.Spec) string {
	tables, columns := publishedColumns(specs)
	where := map[string]string{}
	for _, s := range specs {
		if s.Where != "" {
			where[s.QualifiedTable()] = " WHERE (" + s.Where + ")"
		}
	}
	for i, t := range tables {
		quoted := make([]string, len(columns[t]))
		for j, col := range columns[t] {
			quoted[j] = indexer.QuoteIdent(col)
		}
		tables[i] = t + " (" + strings.Join(quoted, ", ") + ")" + where[t]
	}
	pub := indexer.QuoteIdent(name)
	return "CREATE PUBLICATION " + pub + " FOR TABLE " + strings.Join(tables, ", ") + " WITH (publish_via_partition_root = true); " +
		"COMMENT ON PUBLICATION " + pub + " IS '" + Mark + "'; ALTER PUBLICATION " + pub + " OWNER TO " + role
}

// table checks what serve needs of one index's table: it exists, can be
// read and published, and its key is its replica identity.
func (c *checker) table(s indexer.Spec) {
	check := "index " + s.Name
	t := &table{schema: s.Schema, name: s.Table}
	quiet := slog.New(slog.DiscardHandler)
	if err := t.resolve(c.ctx, c.conn, c.name, s.Key, binding{}, quiet); err != nil {
		c.add(Fail, check, err.Error(), fixFor(err))
		return
	}
	if err := t.resolveColumns(c.ctx, c.conn, []indexer.Spec{s}, quiet); err != nil {
		c.add(Fail, check, err.Error(), "index a column of type "+pgvalue.VectorTypeList())
		return
	}
	if _, err := t.dims(s); err != nil {
		c.add(Fail, check, err.Error(), "correct dims= in --index, or leave it out")
		return
	}
	var canSelect, owner, published bool
	if !c.query(`SELECT has_table_privilege($1::oid, 'SELECT'), pg_has_role((SELECT relowner FROM pg_class WHERE oid = $1::oid), 'USAGE'),
			EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $2 AND schemaname = $3 AND tablename = $4)`,
		[]any{t.oid, c.name, s.Schema, s.Table}, &canSelect, &owner, &published) {
		return
	}
	switch {
	case !canSelect:
		c.add(Fail, check, "no SELECT on "+t.qualified()+" (the initial copy reads it)", "GRANT SELECT ON "+t.qualified()+" TO "+c.user)
	// Without the publication, its finding says who creates it with
	// this table.
	case !owner && !published && c.published:
		add := "as a superuser: ALTER PUBLICATION " + indexer.QuoteIdent(c.name) + " ADD TABLE " + t.qualified() + " (" + indexer.QuoteIdent(t.key.name) + ", " + indexer.QuoteIdent(t.vectors[s.Column].name) + ")"
		if s.Where != "" {
			add += " WHERE (" + s.Where + ")"
		}
		c.add(Fail, check, "only the owner of "+t.qualified()+" can add it to publication "+c.name, add)
	default:
		c.add(OK, check, t.qualified()+" key "+t.key.name+" ("+t.keyType.String()+"), column "+t.vectors[s.Column].name, "")
	}
	// Without SELECT, the trial could only fail for that.
	if s.Where != "" && canSelect {
		t.where = s.Where
		c.rowFilter(t, check+" where=")
	}
}

// rowFilter tries t's row filter as the sidecar will use it, in a
// transaction it rolls back: a publication of t with that filter, and the
// UPDATE and DELETE Postgres then refuses if the filter reads columns
// outside the replica identity (checkRowFilter). Without the right to
// create the publication, it only parses the filter.
func (c *checker) rowFilter(t *table, check string) {
	if c.err != nil {
		return
	}
	fix := "a row filter may read only " + t.key.name + ", the replica identity, e.g. where='" + t.key.name + " % 2 = 0'"
	tx, err := c.conn.Begin(c.ctx)
	if err != nil {
		c.err = err
		return
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(c.ctx, "EXPLAIN SELECT FROM "+t.qualified()+t.filter("")); err != nil {
		c.add(Fail, check, err.Error(), fix)
		return
	}
	if _, err := tx.Exec(c.ctx, "CREATE PUBLICATION "+indexer.QuoteIdent(c.name+"_check")+" FOR TABLE "+t.qualified()+" WHERE ("+t.where+")"); err != nil {
		c.add(Warn, check, "parsed, but not tried in a publication: "+err.Error(), "run vecside check as the table's owner to try it whole")
		return
	}
	if err := checkRowFilter(c.ctx, tx, t); err != nil {
		c.add(Fail, check, err.Error(), fix)
		return
	}
	c.add(OK, check, t.where, "")
}

// fixFor extracts the fix from a resolve error, whose message ends with it.
func fixFor(err error) string {
	if errors.Is(err, ErrNoReplicaIdentity) {
		if _, fix, ok := strings.Cut(err.Error(), "; "); ok {
			return fix
		}
	}
	return "check the --index definition"
}

// Teardown drops the slot and the publication named name, and nothing
// else: one that is not vecside's (see claim; an unmarked publication is
// never adopted here) is refused with ErrNotVecside. A slot in use is not
// dropped: stop its sidecar first. A sidecar that has just stopped still
// holds its slot until its walsender has noticed, so Teardown waits up to
// wait for the slot to be released before it refuses.
func Teardown(ctx context.Context, source, name string, wait time.Duration) ([]string, error) {
	conn, err := pgx.Connect(ctx, source)
	if err != nil {
		return nil, fmt.Errorf("connecting to --source: %w", err)
	}
	defer conn.Close(context.Background())
	own, err := claim(ctx, conn, name, nil)
	if err != nil {
		return nil, err
	}
	var done []string
	if own.slot {
		if err := awaitReleased(ctx, conn, name, wait); err != nil {
			return done, err
		}
		dropped, err := dropSlot(ctx, conn, name)
		if err != nil {
			return done, fmt.Errorf("replicate: dropping slot %s: %w", name, err)
		}
		if dropped {
			done = append(done, "dropped replication slot "+name)
		}
	}
	if own.publication {
		if _, err := conn.Exec(ctx, `DROP PUBLICATION `+indexer.QuoteIdent(name)); err != nil {
			return done, fmt.Errorf("replicate: dropping publication %s: %w", name, err)
		}
		done = append(done, "dropped publication "+name)
	}
	return done, nil
}

// awaitReleased waits, up to wait, until no process holds slot name.
func awaitReleased(ctx context.Context, conn *pgx.Conn, name string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var pid *int32
		err := conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&pid)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("replicate: reading slot %s: %w", name, err)
		case pid == nil:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("replicate: slot %s is still in use by process %d after %s: stop that sidecar first", name, *pid, wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replicate: waiting for slot %s to be released: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

package replicate

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/indexer"
)

// ErrNotVecside: a slot or publication of the sidecar's name is not
// vecside's (another database's, another plugin's, another tool's).
// vecside never drops or changes it; choose another name.
var ErrNotVecside = errors.New("not vecside's")

// Mark is the comment vecside writes on the publications it creates: a
// publication is vecside's only if it carries it (or is adopted, see
// claim). Slots take no comment; see ourSlot.
const Mark = "vecside sidecar"

// ourSlot is the condition on pg_replication_slots that vecside's slot
// meets: logical, in the database the sidecar follows, decoded with
// pgoutput. Slot names are unique in the whole cluster, so one of the name
// in another database, or another tool's, is not ours to drop.
const ourSlot = `slot_type = 'logical' AND database = current_database() AND plugin = 'pgoutput'`

// foreignError says whose an object of the sidecar's name is, and how to
// get out of its way.
type foreignError struct {
	object string // "slot x" or "publication x"
	owner  string // whose it is, or why it is not vecside's
	fix    string
}

func (e *foreignError) Error() string {
	return fmt.Sprintf("replicate: %s %s: %v, so vecside leaves it alone; %s", e.object, e.owner, ErrNotVecside, e.fix)
}

func (e *foreignError) Is(target error) bool { return target == ErrNotVecside }

const chooseName = "give this sidecar another --name"

// ownership is what exists of the slot and the publication of a name,
// once claim has found them to be vecside's.
type ownership struct {
	slot, publication bool
	// adopt: the publication is an older vecside's, made before the mark,
	// and may be marked by this role (its owner).
	adopt bool
}

// claim checks that the slot and the publication named name, where they
// exist, are vecside's, and refuses them otherwise with a *foreignError
// for each (joined). The slot must meet ourSlot, and have a publication of vecside's beside
// it: vecside creates its publication first and drops it last, so a slot
// without one is another tool's (a subscription's, say). A publication is
// vecside's if it carries Mark, or, for one an older vecside made, if it
// lists exactly the tables and columns that specs' indexes read, for
// every change, through partition roots, as vecside publishes them (nil
// specs: no unmarked publication is adopted).
func claim(ctx context.Context, conn *pgx.Conn, name string, specs []indexer.Spec) (ownership, error) {
	var own ownership
	slotErr := claimSlot(ctx, conn, name, &own)
	if slotErr != nil && !errors.Is(slotErr, ErrNotVecside) {
		return own, slotErr
	}
	pubErr := claimPublication(ctx, conn, name, specs, &own)
	if pubErr != nil && !errors.Is(pubErr, ErrNotVecside) {
		return own, pubErr
	}
	if own.slot && !own.publication && pubErr == nil {
		slotErr = &foreignError{"slot " + name, "has no publication " + name + " beside it (vecside makes its publication first and drops it last)",
			chooseName + "; if it is a vecside slot whose publication was dropped by hand, drop it: SELECT pg_drop_replication_slot('" + name + "')"}
	}
	// Both at once: one run says everything that is in the way.
	return own, errors.Join(slotErr, pubErr)
}

func claimSlot(ctx context.Context, conn *pgx.Conn, name string, own *ownership) error {
	var slotType, current string
	var database, plugin *string
	err := conn.QueryRow(ctx, `SELECT slot_type, database, plugin, current_database(), `+ourSlot+`
		FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&slotType, &database, &plugin, &current, &own.slot)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("replicate: reading slot %s: %w", name, err)
	case own.slot:
		return nil
	case slotType != "logical":
		return &foreignError{"slot " + name, "is a " + slotType + " slot (a standby's)", chooseName}
	case deref(database) != current:
		return &foreignError{"slot " + name, "belongs to database " + deref(database) + ", not " + current, chooseName}
	}
	return &foreignError{"slot " + name, "decodes with plugin " + deref(plugin) + ", not pgoutput", chooseName}
}

func claimPublication(ctx context.Context, conn *pgx.Conn, name string, specs []indexer.Spec, own *ownership) error {
	var comment, owner string
	var mine, shaped bool
	err := conn.QueryRow(ctx, `SELECT coalesce(obj_description(p.oid, 'pg_publication'), ''), pg_get_userbyid(p.pubowner), pg_has_role(p.pubowner, 'USAGE'),
			NOT p.puballtables AND p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate AND p.pubviaroot
			AND NOT EXISTS (SELECT FROM pg_publication_namespace n WHERE n.pnpubid = p.oid)
		FROM pg_publication p WHERE p.pubname = $1`, name).Scan(&comment, &owner, &mine, &shaped)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("replicate: reading publication %s: %w", name, err)
	case comment == Mark:
		own.publication = true
		return nil
	}
	if shaped && len(specs) > 0 {
		same, err := listsExactly(ctx, conn, name, specs)
		if err != nil {
			return err
		}
		if same {
			own.publication, own.adopt = true, mine
			return nil
		}
	}
	mark := "no comment"
	if comment != "" {
		mark = fmt.Sprintf("comment %q", comment)
	}
	return &foreignError{"publication " + name, "was not made by vecside (owner " + owner + ", " + mark + ")",
		chooseName + "; if an older vecside made it, mark it as vecside's: COMMENT ON PUBLICATION " + indexer.QuoteIdent(name) + " IS '" + Mark + "'"}
}

// listsExactly reports whether publication name lists the tables that
// specs read, each with the key and vector columns only.
func listsExactly(ctx context.Context, conn *pgx.Conn, name string, specs []indexer.Spec) (bool, error) {
	tables, want := publishedColumns(specs)
	rows, err := conn.Query(ctx, `SELECT schemaname, tablename, attnames FROM pg_publication_tables WHERE pubname = $1`, name)
	if err != nil {
		return false, fmt.Errorf("replicate: reading publication %s: %w", name, err)
	}
	listed := 0
	same := true
	var schema, table string
	var columns []string
	_, err = pgx.ForEachRow(rows, []any{&schema, &table, &columns}, func() error {
		listed++
		cols, ok := want[indexer.QuoteIdent(schema)+"."+indexer.QuoteIdent(table)]
		same = same && ok && sameSet(columns, cols)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("replicate: reading publication %s: %w", name, err)
	}
	return same && listed == len(tables), nil
}

// dropSlot drops slot name if it meets ourSlot, in one statement: a slot
// of that name that another tool made since it was looked at is left
// alone. It reports whether it dropped one.
func dropSlot(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	tag, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND `+ourSlot, name)
	return tag.RowsAffected() == 1, err
}

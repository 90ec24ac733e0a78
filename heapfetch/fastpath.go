package heapfetch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The fast path: a large vector is TOASTed, so fetching it is the dearest
// part of a query. The sidecar returns with each candidate the id of the
// transaction that wrote the row its distance comes from, where that
// distance is exact (store=float): knn's xid column with with_xid=true.
// The heap fetch, one statement and so one snapshot, returns each
// candidate's xmin and its vector only where the xmin differs: where it
// is the same, the heap's row is the version the sidecar measured, and
// its distance is the one the client would compute.
//
// xids are trusted only when the heap server's system identifier and
// timeline equal those of the sidecar's source (after a failover, PITR or
// restore, xids are reused); the statement checks them itself, so a heap
// connection that lands on another server after a failover falls back to
// fetching, and knn's xid_source makes the sidecar return no xids once it
// follows another source than the one the client read (it forgets them
// all when its source changes). The sidecar publishes an xid only once the transaction that
// wrote the row has been applied whole, and never one whose version of the
// row has another vector (see the indexer), so a matching xmin is never
// stale.

// candidate is one row the sidecar proposes.
type candidate struct {
	key      any
	distance float64
	xid      int64 // 0: unknown, fetch the vector
}

// FastPathStats count how often the fast path spared a vector fetch.
type FastPathStats struct {
	Candidates     int64 // rows fetched from the heap
	VectorsFetched int64 // of those, rows whose vector was fetched too
}

// HitRate is the share of candidates whose vector was not fetched.
func (s FastPathStats) HitRate() float64 {
	if s.Candidates == 0 {
		return 0
	}
	return 1 - float64(s.VectorsFetched)/float64(s.Candidates)
}

// FastPathStats reports the client's counts since it was made.
func (c *Client) FastPathStats() FastPathStats {
	return FastPathStats{Candidates: c.fast.candidates.Load(), VectorsFetched: c.fast.vectors.Load()}
}

// fastPath is the client's state for the fast path.
type fastPath struct {
	candidates, vectors atomic.Int64
	denied              atomic.Bool // the heap role may not read the server's identity
	mu                  sync.Mutex
	sources             map[string]source // by index name
}

// source is a sidecar's source system and timeline for an index, as last
// read from vecside_status().
type source struct {
	Source // zero: unknown
	read   time.Time
}

// sourceTTL is how long a sidecar's source is taken as known: a sidecar
// pointed at another server is noticed within it.
const sourceTTL = 10 * time.Second

// source returns the sidecar's source for index name; zero if it does
// not report one (it has not connected yet, or predates the fast path).
func (c *Client) source(ctx context.Context, name string) (source, error) {
	c.fast.mu.Lock()
	s, ok := c.fast.sources[name]
	c.fast.mu.Unlock()
	if ok && time.Since(s.read) < sourceTTL {
		return s, nil
	}
	s = source{read: time.Now()}
	err := c.shards[0].ask(ctx, func(ctx context.Context, q Querier) error {
		rows, err := q.Query(ctx, "SELECT index_name, system_identifier, timeline FROM vecside_status()")
		if err != nil {
			return err
		}
		var index string
		var sys, tli *int64
		_, err = pgx.ForEachRow(rows, []any{&index, &sys, &tli}, func() error {
			if index == name && sys != nil && tli != nil {
				s.SystemID, s.Timeline = *sys, *tli
			}
			return nil
		})
		return err
	})
	if err != nil {
		return source{}, fmt.Errorf("heapfetch: reading the source of index %s from vecside_status(): %w", name, err)
	}
	c.fast.mu.Lock()
	if c.fast.sources == nil {
		c.fast.sources = map[string]source{}
	}
	c.fast.sources[name] = s
	c.fast.mu.Unlock()
	return s, nil
}

// sameVersion is the SQL expression that is true where the heap's row
// is the version the sidecar measured: its xmin is the sidecar's xid for
// its key (the keys bound as $keys, their xids next), and the server is
// the sidecar's source (system identifier and timeline bound after). The
// server's identity is read once per statement (an InitPlan); a
// primary's timeline is that of its WAL insert position, a standby's that
// of its last restartpoint. The system identifier is read from the
// control file once per session and kept in the session's setting
// sessionSystemID: a backend never changes servers, and the file's read
// cost a fast-path statement 15–25 µs.
func sameVersion(key string, keys int) string {
	return fmt.Sprintf(`xmin::text::int8 = ($%[2]d::int8[])[array_position($%[1]d, %[5]s)] AND (
		SELECT coalesce(nullif(current_setting('%[6]s', true), ''),
				set_config('%[6]s', (SELECT system_identifier FROM pg_control_system())::text, false))::int8 = $%[3]d
			AND CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())
			ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END = $%[4]d)`,
		keys, keys+1, keys+2, keys+3, key, sessionSystemID)
}

// sessionSystemID is the setting in which a heap session keeps its
// server's system identifier. The session's own SQL could set it to
// another server's: a session shared with SQL the application does not
// control should not take the fast path (Request.AlwaysFetch).
const sessionSystemID = "heapfetch.system_identifier"

// insufficientPrivilege is SQLSTATE 42501.
const insufficientPrivilege = "42501"

// mapKey makes a key usable as a map key whatever width of integer pgx
// returned it as.
func mapKey(k any) any {
	switch k.(type) {
	case int16, int32, int64:
		return toInt64(k)
	}
	return k
}

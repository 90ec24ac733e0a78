package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vecside/vecside/indexer"
)

// Config configures a Replicator. Zero values take the defaults noted.
type Config struct {
	// Source is a libpq connection string or URL for the database.
	Source string
	// Name names the publication and the slot. Default "vecside".
	Name string
	// Entries are the indexes to feed; they must not be empty.
	Entries []*indexer.Entry
	// StatusInterval is the longest gap between status updates; it is
	// shortened to half of wal_sender_timeout. Default 10 s.
	StatusInterval time.Duration
	// SlotTimeout bounds slot creation, which waits for running
	// transactions to end. Default 60 s.
	SlotTimeout time.Duration
	// Durable returns the LSN up to which every index's durable state
	// reaches, or 0 while nothing is durable. Nil: nothing ever is.
	Durable func() indexer.LSN
	// DataDir holds the indexes' checkpoints. At start, indexes are loaded
	// from there and the stream resumes where they left off, when the slot
	// allows it. Empty: always copy the tables.
	DataDir string
	// OnSlotLost says what to do when Postgres invalidates the slot:
	// "fail" (default) stops with an error; "resync" drops the slot and
	// copies the tables again.
	OnSlotLost string
	// HealthInterval is how often the slot and the publication are checked.
	// Default 10 s.
	HealthInterval time.Duration
	// ReportHealth, if set, receives every health check.
	ReportHealth func(indexer.SourceHealth)
	// BeforeCopy, if set, runs after the slot and its snapshot exist and
	// before the initial copy starts (a test hook).
	BeforeCopy func()
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Stats are the replicator's counters, read with Snapshot.
type Stats struct {
	Transactions    atomic.Int64
	Changes         atomic.Int64
	BadKeys         atomic.Int64
	UnknownMessages atomic.Int64
	Repairs         atomic.Int64
	Reconnects      atomic.Int64
	CopiedRows      atomic.Int64
	confirmed       atomic.Uint64
	slot            atomic.Pointer[indexer.SourceHealth]
}

// Slot is the last health check of the slot, nil before the first.
func (s *Stats) Slot() *indexer.SourceHealth { return s.slot.Load() }

func (s *Stats) setConfirmed(l indexer.LSN) { s.confirmed.Store(uint64(l)) }

// Confirmed is the flush position last reported to Postgres.
func (s *Stats) Confirmed() indexer.LSN { return indexer.LSN(s.confirmed.Load()) }

// Replicator keeps a set of indexes in sync with their tables through one
// publication and one logical replication slot.
type Replicator struct {
	cfg   Config
	log   *slog.Logger
	stats Stats

	mu     sync.Mutex
	start  indexer.LSN // the slot's consistent point, or where streaming resumed
	source indexer.Source
	copied bool // the indexes hold a complete copy (snapshot or checkpoints)
}

var slotName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// New checks cfg and returns a Replicator; Run starts it.
func New(cfg Config) (*Replicator, error) {
	if cfg.Name == "" {
		cfg.Name = "vecside"
	}
	if !slotName.MatchString(cfg.Name) {
		return nil, fmt.Errorf("name %q: want [a-z_][a-z0-9_]{0,62} (it names the publication and the slot)", cfg.Name)
	}
	if len(cfg.Entries) == 0 {
		return nil, errors.New("no index to replicate")
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 10 * time.Second
	}
	if cfg.SlotTimeout <= 0 {
		cfg.SlotTimeout = 60 * time.Second
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = 10 * time.Second
	}
	switch cfg.OnSlotLost {
	case "":
		cfg.OnSlotLost = "fail"
	case "fail", "resync":
	default:
		return nil, fmt.Errorf("on-slot-lost=%q: want fail or resync", cfg.OnSlotLost)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Replicator{cfg: cfg, log: cfg.Logger.With("subsystem", "replicate")}, nil
}

// Stats exposes the counters.
func (r *Replicator) Stats() *Stats { return &r.stats }

// Source is the system, timeline and slot being followed (known once Run
// has connected).
func (r *Replicator) Source() indexer.Source {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.source
}

// Covered is the position confirmed to Postgres: what durable state
// covers, and never less than where streaming started (the slot is there
// already), so never zero.
func (r *Replicator) Covered() indexer.LSN {
	r.mu.Lock()
	start := r.start
	r.mu.Unlock()
	if r.cfg.Durable != nil {
		return max(start, r.cfg.Durable())
	}
	return start
}

// Run connects, copies the tables if needed, and follows the stream until
// ctx ends. Connection failures are retried with backoff; configuration
// errors (a missing table, a key that is not the replica identity) are
// returned.
func (r *Replicator) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		started := time.Now()
		err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var cfgErr configError
		if errors.As(err, &cfgErr) {
			return cfgErr.error
		}
		if isSlotLost(err) {
			if r.cfg.OnSlotLost == "fail" {
				lost := fmt.Errorf("replication slot %s was invalidated (it retained more WAL than max_slot_wal_keep_size allows), so changes were lost; restart with --on-slot-lost=resync to copy the tables again: %w", r.cfg.Name, err)
				for _, e := range r.cfg.Entries {
					e.Fail(lost)
				}
				return lost
			}
			r.log.Warn("replication slot invalidated; dropping it and copying the tables again", "slot", r.cfg.Name, "err", err)
			r.mu.Lock()
			r.copied = false
			r.mu.Unlock()
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		r.stats.Reconnects.Add(1)
		r.log.Warn("replication interrupted; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// configError marks errors that retrying cannot fix.
type configError struct{ error }

func (r *Replicator) runOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.cfg.Source)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	tables, err := resolveTables(ctx, conn, r.cfg.Entries)
	if err != nil {
		return configError{err}
	}
	if err := ensurePublication(ctx, conn, r.cfg.Name, tables); err != nil {
		return configError{err}
	}
	statusEvery, err := r.statusInterval(ctx, conn)
	if err != nil {
		return err
	}
	repl, err := connectReplication(ctx, r.cfg.Source)
	if err != nil {
		return err
	}
	defer repl.Close(context.Background())
	sys, err := pglogrepl.IdentifySystem(ctx, repl)
	if err != nil {
		return fmt.Errorf("IDENTIFY_SYSTEM: %w", err)
	}
	src := indexer.Source{SystemID: parseSystemID(sys.SystemID), Timeline: uint32(sys.Timeline), Slot: r.cfg.Name}
	if !r.hasCopy() && r.cfg.DataDir != "" {
		r.restore(tables, src)
	}
	start, err := r.prepareSlot(ctx, conn, repl, tables)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.start, r.source = start, src
	r.mu.Unlock()
	repair := func(ctx context.Context, t *table, e *indexer.Entry, key string) error {
		r.stats.Repairs.Add(1)
		return repairRow(ctx, conn, t, e, key)
	}
	dec := newDecoder(tables, repair, r.log, &r.stats)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	monitorErr := make(chan error, 1)
	go func() {
		err := r.monitor(sctx, tables, r.cfg.HealthInterval)
		if err != nil {
			cancel()
		}
		monitorErr <- err
	}()
	err = r.stream(sctx, repl, start, dec, statusEvery)
	cancel()
	// The monitor's error is the cause only when it stopped the stream.
	if merr := <-monitorErr; merr != nil && errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return merr
	}
	return err
}

func (r *Replicator) hasCopy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copied
}

// restore loads every index from its checkpoint. Only if all of them load
// do the indexes count as holding a copy; otherwise the tables are copied
// again, and the log says why.
func (r *Replicator) restore(tables []*table, src indexer.Source) {
	state := indexer.ReadIdleState(r.cfg.DataDir)
	for _, t := range tables {
		for _, e := range t.entries {
			lsn, err := e.LoadCheckpoint(r.cfg.DataDir, src, state)
			if err != nil {
				r.log.Warn("cannot resume from the checkpoint; the tables will be copied again", "index", e.Spec().Name, "err", err)
				return
			}
			r.log.Info("index loaded from its checkpoint", "index", e.Spec().Name, "lsn", lsn.String(), "rows", e.Status().Rows)
		}
	}
	r.mu.Lock()
	r.copied = true
	r.mu.Unlock()
}

// prepareSlot returns where to stream from: after a copy under a new
// slot's snapshot, or, when the indexes already hold the tables (restored
// from checkpoints, or a reconnect), from the oldest position they hold,
// provided the slot has not confirmed past it. Postgres would silently
// start later than asked, so a slot ahead of the indexes means the changes
// between are gone, and the tables are copied again.
func (r *Replicator) prepareSlot(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn, tables []*table) (indexer.LSN, error) {
	var confirmed *string
	err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, r.cfg.Name).Scan(&confirmed)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	if exists && r.hasCopy() && confirmed != nil {
		slotAt, err := indexer.ParseLSN(*confirmed)
		if err != nil {
			return 0, err
		}
		from, behind := r.oldestApplied(tables, slotAt)
		if behind == nil {
			return from, nil
		}
		r.log.Warn("the slot has confirmed past an index's position; copying the tables again",
			"slot", r.cfg.Name, "confirmed", slotAt.String(), "index", behind.Spec().Name, "applied", behind.Applied().String())
	}
	if exists {
		r.log.Info("dropping the slot to take a fresh snapshot", "slot", r.cfg.Name)
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, r.cfg.Name); err != nil {
			return 0, fmt.Errorf("dropping slot %s (is another vecside using it?): %w", r.cfg.Name, err)
		}
	}
	return r.snapshot(ctx, conn, repl, tables)
}

// oldestApplied is the lowest applied LSN of the indexes, or the index
// that is behind slotAt.
func (r *Replicator) oldestApplied(tables []*table, slotAt indexer.LSN) (indexer.LSN, *indexer.Entry) {
	oldest := indexer.LSN(1<<64 - 1)
	for _, t := range tables {
		for _, e := range t.entries {
			applied := e.Applied()
			if applied < slotAt {
				return 0, e
			}
			oldest = min(oldest, applied)
		}
	}
	return oldest, nil
}

// snapshot creates the slot and copies every table under its snapshot.
func (r *Replicator) snapshot(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn, tables []*table) (indexer.LSN, error) {
	slot, err := createSlot(ctx, repl, r.cfg.Name, r.cfg.SlotTimeout)
	if err != nil {
		return 0, err
	}
	point, err := indexer.ParseLSN(slot.ConsistentPoint)
	if err != nil {
		return 0, err
	}
	r.log.Info("slot created; copying tables", "slot", r.cfg.Name, "consistent_point", point.String(), "snapshot", slot.SnapshotName)
	if r.cfg.BeforeCopy != nil {
		r.cfg.BeforeCopy()
	}
	for _, t := range tables {
		for _, e := range t.entries {
			e.Rebuild()
		}
	}
	for _, t := range tables {
		began := time.Now()
		var copied int64
		err := copyTable(ctx, conn, slot.SnapshotName, t, func(rows int64) {
			copied = rows
			r.log.Info("copying", "table", t.qualified(), "rows", rows, "elapsed", time.Since(began).Round(time.Millisecond).String())
		})
		r.stats.CopiedRows.Add(copied)
		if err != nil {
			return 0, err
		}
	}
	for _, t := range tables {
		for _, e := range t.entries {
			e.SetApplied(point)
			e.SetReady()
		}
	}
	r.mu.Lock()
	r.copied = true
	r.mu.Unlock()
	return point, nil
}

// statusInterval is the configured interval, shortened to half of the
// server's wal_sender_timeout (0 disables that timeout).
func (r *Replicator) statusInterval(ctx context.Context, conn *pgx.Conn) (time.Duration, error) {
	var ms int64
	if err := conn.QueryRow(ctx, `SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout'`).Scan(&ms); err != nil {
		return 0, fmt.Errorf("reading wal_sender_timeout: %w", err)
	}
	every := r.cfg.StatusInterval
	if half := time.Duration(ms) * time.Millisecond / 2; ms > 0 && half < every {
		every = half
	}
	return every, nil
}

func connectReplication(ctx context.Context, source string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(source)
	if err != nil {
		return nil, configError{fmt.Errorf("--source: %w", err)}
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening a replication connection (the role needs the REPLICATION attribute): %w", err)
	}
	return conn, nil
}

func parseSystemID(s string) uint64 {
	var id uint64
	fmt.Sscan(s, &id)
	return id
}

// repairRow reads one row's vector from the table, for a change that
// referred to a vector the index does not have. The read sees a newer
// state than the stream position; later changes in the stream overwrite
// it, so the index still converges.
func repairRow(ctx context.Context, conn *pgx.Conn, t *table, e *indexer.Entry, key string) error {
	sql := fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1::text::%s",
		indexer.QuoteIdent(e.Spec().Column), t.qualified(), indexer.QuoteIdent(t.key), t.keyType)
	res := conn.PgConn().ExecParams(ctx, sql, [][]byte{[]byte(t.keyType.FormatKey(key))}, nil, nil, []int16{1}).Read()
	if res.Err != nil {
		return fmt.Errorf("reading row %s of %s: %w", t.keyType.FormatKey(key), t.qualified(), res.Err)
	}
	if len(res.Rows) == 0 {
		return nil // deleted since; the stream will say so
	}
	e.Upsert(key, decodeVector(e, res.Rows[0][0], true))
	return nil
}

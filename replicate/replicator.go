package replicate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
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
	// Entries are the indexes to feed at first; Add and Remove change
	// them.
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
	// ReceiveTimeout is how long the stream may stay silent before the
	// connection is presumed dead (a network partition, a server gone
	// without a word) and made again. Halfway through, a status update
	// asks the server to answer, so an idle but healthy connection always
	// speaks in time. Default 60 s, as Postgres's wal_receiver_timeout.
	// It also bounds every quick exchange (connecting, the queries that
	// start a session, a read that repairs a row, each health check) and a
	// copy that stops receiving rows.
	ReceiveTimeout time.Duration
	// HealthInterval is how often the slot and the publication are checked.
	// Default 1 s: an index of a dropped table answers until the check
	// sees it, and the check costs Postgres two index lookups per table.
	HealthInterval time.Duration
	// ReportHealth, if set, receives every health check.
	ReportHealth func(indexer.SourceHealth)
	// CopyReaders is how many connections copy a large table in parallel
	// ctid ranges. Default: the number of CPUs.
	CopyReaders int
	// BeforeCopy, if set, runs after a snapshot has been exported and
	// before the copy under it starts (a test hook).
	BeforeCopy func()
	// CopyProgress, if set, receives the progress of each table copy
	// about every second, and each copy's end; nil logs a line every 5 s
	// instead.
	CopyProgress func(CopyProgress)
	// BeforeMessage, if set, runs before the stream applies each pgoutput
	// message, with its type byte ('B', 'I', 'U', 'D', 'C', …); the stream
	// waits while it blocks (a test hook, to hold a transaction half
	// applied).
	BeforeMessage func(typ byte)
	// ReportSource, if set, is told the system, timeline, slot and
	// database followed, each time streaming starts.
	ReportSource func(indexer.Source)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Stats are the replicator's counters, for metrics.
type Stats struct {
	Transactions    atomic.Int64
	Changes         atomic.Int64
	BadKeys         atomic.Int64
	UnknownMessages atomic.Int64
	Repairs         atomic.Int64
	Reconnects      atomic.Int64
	CopiedRows      atomic.Int64
	confirmed       atomic.Uint64
}

func (s *Stats) setConfirmed(l indexer.LSN) { s.confirmed.Store(uint64(l)) }

// Confirmed is the flush position last confirmed to Postgres.
func (s *Stats) Confirmed() indexer.LSN { return indexer.LSN(s.confirmed.Load()) }

// Replicator keeps a set of indexes in sync with their tables through one
// publication and one logical replication slot.
type Replicator struct {
	cfg     Config
	indexes []Index // cfg.Entries
	log     *slog.Logger
	stats   Stats

	mu       sync.Mutex
	floor    indexer.LSN // where the slot was when streaming began: its consistent point or confirmed position
	source   indexer.Source
	restored bool           // checkpoints have been looked at
	resolved bool           // the tables have been resolved once
	streamed atomic.Bool    // the current attempt reached streaming
	pending  map[Index]bool // entries that hold no copy of their table yet
	waiting  map[Index]waitFor
	// change is signalled when indexes are added or removed: the session
	// ends, and the next resolves the new set.
	change chan struct{}
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
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 10 * time.Second
	}
	if cfg.SlotTimeout <= 0 {
		cfg.SlotTimeout = 60 * time.Second
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = time.Second
	}
	if cfg.ReceiveTimeout <= 0 {
		cfg.ReceiveTimeout = 60 * time.Second
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
	if cfg.CopyReaders <= 0 {
		cfg.CopyReaders = runtime.NumCPU()
	}
	r := &Replicator{cfg: cfg, log: cfg.Logger.With("subsystem", "replicate"), pending: map[Index]bool{}, waiting: map[Index]waitFor{}, change: make(chan struct{}, 1)}
	for _, e := range cfg.Entries {
		x := entry{e}
		r.indexes = append(r.indexes, x)
		r.pending[x] = true
	}
	return r, nil
}

// entries are the indexes fed now.
func (r *Replicator) entries() []Index {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.indexes)
}

// Add feeds e too, from a copy of its table while the others stream on:
// the session ends, and the next resolves the tables with e's.
func (r *Replicator) Add(e *indexer.Entry) {
	x := entry{e}
	r.mu.Lock()
	r.indexes = append(r.indexes, x)
	r.pending[x] = true
	r.mu.Unlock()
	r.changed()
}

// Remove stops feeding e; the session ends, and the next leaves its table
// out if no other index reads it.
func (r *Replicator) Remove(e *indexer.Entry) {
	x := entry{e}
	r.mu.Lock()
	r.indexes = slices.DeleteFunc(r.indexes, func(i Index) bool { return i == x })
	delete(r.pending, x)
	delete(r.waiting, x)
	r.mu.Unlock()
	r.changed()
}

// changed tells the session under way that the indexes changed.
func (r *Replicator) changed() {
	select {
	case r.change <- struct{}{}:
	default:
	}
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
// covers, and never less than where the slot was when streaming began
// (confirming that again moves nothing), so never zero. Where streaming
// resumed is no floor: indexes resume from what they have applied, which
// after a reconnect may be more than their checkpoints hold. While every
// index is in error, more is confirmed (see sendStatus).
func (r *Replicator) Covered() indexer.LSN {
	r.mu.Lock()
	floor := r.floor
	r.mu.Unlock()
	if r.cfg.Durable != nil {
		return max(floor, r.cfg.Durable())
	}
	return floor
}

// Run connects, copies the tables if needed, and follows the stream until
// ctx ends. Connection failures are retried with backoff, and a change of
// the catalog (a table dropped or created) at once; configuration errors
// (a key that is not the replica identity) fail their indexes, and are
// returned only when they leave nothing to serve at the first start (see
// resolve).
func (r *Replicator) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		began := time.Now()
		err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.As(err, new(configError)) {
			return err
		}
		if errors.Is(err, errCatalogChanged) {
			// At once, but never more than a session a second, whatever
			// keeps changing.
			backoff = time.Second
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(began.Add(time.Second))):
			}
			continue
		}
		if isSlotLost(err) {
			if r.cfg.OnSlotLost == "fail" {
				lost := fmt.Errorf("replication slot %s was invalidated (it retained more WAL than max_slot_wal_keep_size allows), so changes were lost; restart with --on-slot-lost=resync to copy the tables again: %w", r.cfg.Name, err)
				for _, e := range r.entries() {
					e.Fail(lost)
				}
				return lost
			}
			r.log.Warn("replication slot invalidated; dropping it and copying the tables again", "slot", r.cfg.Name, "err", err)
			r.mu.Lock()
			for _, e := range r.indexes {
				r.pending[e] = true
			}
			r.mu.Unlock()
		}
		// An attempt that got as far as streaming was a success that
		// ended: start the backoff over.
		if r.streamed.Swap(false) {
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

// bounded limits an exchange with the server that should be quick to
// ReceiveTimeout: over a partitioned connection neither an answer nor an
// error ever comes.
func (r *Replicator) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.ReceiveTimeout)
}

// configError marks errors that retrying cannot fix.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

func (r *Replicator) runOnce(ctx context.Context) error {
	// The quick exchanges that start a session, bounded together.
	qctx, cancel := r.bounded(ctx)
	defer cancel()
	conn, err := pgx.Connect(qctx, r.cfg.Source)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	// Errors that retrying cannot fix come back as configError.
	tables, err := r.resolve(qctx, conn)
	if err != nil {
		return err
	}
	statusEvery, err := r.statusInterval(qctx, conn)
	if err != nil {
		return err
	}
	repl, err := connectReplication(qctx, r.cfg.Source)
	if err != nil {
		return err
	}
	defer repl.Close(context.Background())
	sys, err := pglogrepl.IdentifySystem(qctx, repl)
	if err != nil {
		return fmt.Errorf("IDENTIFY_SYSTEM: %w", err)
	}
	// IDENTIFY_SYSTEM's dbname is current_database() of the replication
	// connection, which connects as conn does.
	src := indexer.Source{SystemID: parseSystemID(sys.SystemID), Timeline: uint32(sys.Timeline), Slot: r.cfg.Name, Database: sys.DBName}
	r.mu.Lock()
	prev := r.source
	r.mu.Unlock()
	if prev.SystemID != 0 && (prev.SystemID != src.SystemID || prev.Timeline != src.Timeline) {
		// xids of another system or timeline mean other writes: forget
		// them before the new source is reported (see indexer's
		// SearchOptions.XIDSource).
		r.log.Warn("the source changed system or timeline; forgetting every row's xid", "system", src.SystemID, "timeline", src.Timeline)
		for _, e := range r.entries() {
			e.Stream().ForgetAllXIDs()
		}
	}
	// Reported before checkpoints are restored: an index restored is
	// ready at once, and its xids are of this source (a checkpoint of
	// another is refused), so a search may use them from then on.
	if r.cfg.ReportSource != nil {
		r.cfg.ReportSource(src)
	}
	r.mu.Lock()
	restore := !r.restored && r.cfg.DataDir != ""
	r.restored = true
	r.mu.Unlock()
	if restore {
		r.restore(tables, src)
	}
	for _, t := range tables {
		for _, e := range t.unpublished() {
			r.recopy(e, "the publication did not list the index's columns, so changes may be missing")
		}
	}
	start, floor, syncs, err := r.prepareSlot(ctx, conn, repl, tables)
	defer func() {
		for _, s := range syncs {
			s.repl.Close(context.Background()) // drops the temporary slot
		}
	}()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.floor, r.source = floor, src
	r.mu.Unlock()
	repair := func(ctx context.Context, t *table, e Index, key string, xid uint32) error {
		r.stats.Repairs.Add(1)
		ctx, cancel := r.bounded(ctx)
		defer cancel()
		return repairRow(ctx, conn, t, e, key, xid)
	}
	dec := newDecoder(tables, repair, r.copyAgain, r.log, &r.stats)
	dec.before = r.cfg.BeforeMessage
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	background := make(chan error, 3)
	go func() { background <- r.monitor(sctx, tables, r.cfg.HealthInterval) }()
	go func() { background <- r.rebuilds(sctx, tables) }()
	go func() { background <- r.copyInTurn(sctx, syncs) }()
	streamDone := make(chan error, 1)
	go func() { streamDone <- r.stream(sctx, repl, start, dec, statusEvery) }()
	// The first failure stops the rest; a sync or the monitor may be it.
	for waiting := 3; ; {
		select {
		case err := <-streamDone:
			cancel()
			for ; waiting > 0; waiting-- {
				if berr := <-background; berr != nil && errors.Is(err, context.Canceled) && ctx.Err() == nil {
					err = berr
				}
			}
			return err
		case err := <-background:
			waiting--
			if err != nil {
				cancel()
				<-streamDone
				for ; waiting > 0; waiting-- {
					<-background
				}
				return err
			}
		}
	}
}

// copyInTurn runs the table syncs one after another: the memory and the
// cores that copies take stay those of one table's (a rebuild, one at a
// time too, may run beside it), however many tables are copied again at
// once after a migration.
func (r *Replicator) copyInTurn(ctx context.Context, syncs []tableSync) error {
	for _, s := range syncs {
		if err := r.copy(ctx, s.job, func() { s.repl.Close(context.Background()) }); err != nil {
			return err
		}
	}
	return nil
}

// resolve resolves the tables and brings the publication up to date. An
// index whose table does not exist, or that the publication does not
// include and the sidecar's role cannot add, waits; one whose definition
// or table is wrong in a way retrying cannot change is put into the error
// state. The others are served: no index stops another. Only at the first
// start with no index left to serve or wait is that an error, which says
// at once what to fix.
func (r *Replicator) resolve(ctx context.Context, conn *pgx.Conn) ([]*table, error) {
	indexes := r.entries()
	tables, unresolved, err := resolveTables(ctx, conn, r.cfg.Name, indexes, r.binding, r.log)
	if err != nil {
		return nil, err
	}
	for _, u := range unresolved {
		for _, e := range u.entries {
			if state, _ := e.State(); state == indexer.StateError {
				continue
			}
			if !errors.Is(u.err, errNoTable) {
				failOnly(r.log, e, u.err)
				continue
			}
			w := missingTable(u.qualified, fmt.Sprintf("table %s does not exist; waiting for it to be created (if the name is wrong, fix it in --index)", u.qualified))
			r.mu.Lock()
			if was, ok := r.waiting[e]; ok && was.table == w.table {
				w = was
			}
			r.mu.Unlock()
			r.wait(e, w)
		}
	}
	r.follow(tables)
	specs := make([]indexer.Spec, len(indexes))
	for i, e := range indexes {
		specs[i] = e.Spec()
	}
	own, err := claim(ctx, conn, r.cfg.Name, specs)
	if errors.Is(err, ErrNotVecside) {
		return nil, configError{err}
	}
	if err != nil {
		return nil, err
	}
	refused, err := ensurePublication(ctx, conn, r.cfg.Name, tables, own)
	if err != nil {
		return nil, err
	}
	for t, err := range refused {
		var unpublished publicationRefused
		for _, e := range t.entries {
			if errors.As(err, &unpublished) {
				r.wait(e, unpublishedTable(t, r.cfg.Name, unpublished.fix))
			} else {
				failOnly(r.log, e, err)
			}
		}
	}
	tables = slices.DeleteFunc(tables, func(t *table) bool { return refused[t] != nil })
	r.mu.Lock()
	first := !r.resolved
	r.resolved = true
	r.mu.Unlock()
	if !first || len(indexes) == 0 || slices.ContainsFunc(indexes, func(e Index) bool { state, _ := e.State(); return state != indexer.StateError }) {
		return tables, nil
	}
	failed := make([]error, len(indexes))
	for i, e := range indexes {
		_, why := e.State()
		failed[i] = errors.New(why)
	}
	return nil, configError{errors.Join(failed...)}
}

// binding is what is known of the table e followed: the OID it is bound
// to, and before the checkpoints are loaded, the one its checkpoint
// records (a hint: the file is checked when it is loaded).
func (r *Replicator) binding(e Index) binding {
	b := binding{live: e.Status().TableOID}
	r.mu.Lock()
	restored := r.restored
	r.mu.Unlock()
	if r.cfg.DataDir != "" && !restored {
		if h, err := indexer.ReadCheckpointHeader(e.Durable().CheckpointPath(r.cfg.DataDir)); err == nil {
			b.checkpoint = h.TableOID
		}
	}
	return b
}

// follow binds each entry to its table as just resolved: its OID, which
// checkpoints record (one of another OID is not loaded), and its name. An
// entry that holds rows of a table of another OID, which was dropped and
// created again under its name while the replicator was away (a
// reconnect), holds rows of a table that is gone: its table is copied
// again. It is emptied before it takes the new OID, so that no checkpoint
// records the old table's rows under the new table's OID. Entries in
// error need nothing.
func (r *Replicator) follow(tables []*table) {
	for _, t := range tables {
		for _, e := range t.entries {
			r.mu.Lock()
			delete(r.waiting, e)
			r.mu.Unlock()
			was := e.Status().TableOID
			if state, _ := e.State(); was != 0 && was != t.oid && state != indexer.StateError {
				r.recopy(e, "the table was dropped and created again (another OID)", "table", t.qualified(), "was_oid", was, "oid", t.oid)
			}
			e.Durable().SetTable(indexer.Table{OID: t.oid, Schema: t.schema, Name: t.name})
		}
	}
}

// restore loads the indexes that have a checkpoint of this source; the
// others stay pending and are copied, each table on its own, while the
// loaded ones stream from where they left off. A checkpoint of another
// table OID (the table was dropped and created again) or of a format
// that does not record one is refused by LoadCheckpoint; one written for
// other column types (the key's type was changed) is no use either.
func (r *Replicator) restore(tables []*table, src indexer.Source) {
	state := indexer.ReadIdleState(r.cfg.DataDir)
	for _, t := range tables {
		for _, e := range slices.Clone(t.entries) {
			lsn, err := e.Durable().LoadCheckpoint(r.cfg.DataDir, src, state)
			switch {
			case errors.Is(err, fs.ErrNotExist): // a first start
				r.log.Info("no checkpoint yet; the table will be copied", "index", e.Spec().Name)
				continue
			case err != nil:
				r.log.Warn("index has no usable checkpoint; its table will be copied", "index", e.Spec().Name, "err", err)
				continue
			}
			r.mu.Lock()
			delete(r.pending, e)
			r.mu.Unlock()
			r.log.Info("index loaded from its checkpoint", "index", e.Spec().Name, "lsn", lsn.String(), "rows", e.Status().Rows)
			// Loading took the checkpoint's types: give the entry its
			// table's again.
			kt, vt := e.KeyType(), e.VectorType()
			if err := t.configure(e); err != nil {
				err = fmt.Errorf("%w; its checkpoint holds vectors of another dimension: remove %s to copy the table again", err, e.Durable().CheckpointPath(r.cfg.DataDir))
				failOnly(r.log, e, err)
				t.entries = slices.DeleteFunc(t.entries, func(x Index) bool { return x == e })
				continue
			}
			if kt != t.keyType || vt != e.VectorType() {
				r.recopy(e, "the checkpoint was written for other column types", "checkpoint_key_type", kt.String(), "key_type", t.keyType.String(),
					"checkpoint_vector_type", vt.String(), "vector_type", e.VectorType().String())
			}
		}
	}
}

// split returns the entries holding state, and the pending ones by table.
func (r *Replicator) split(tables []*table) (holding []Index, pending map[*table][]Index) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pending = map[*table][]Index{}
	for _, t := range tables {
		for _, e := range t.entries {
			if r.pending[e] {
				pending[t] = append(pending[t], e)
			} else {
				holding = append(holding, e)
			}
		}
	}
	return holding, pending
}

// tableSync is a copy of one table for its pending entries, under the
// snapshot of a temporary slot whose connection stays open until the copy
// ends.
type tableSync struct {
	repl *pgconn.PgConn
	job  copyJob
}

// prepareSlot returns where to stream from, where the slot is (see
// Covered), and the table syncs to run beside the stream.
//
// Postgres silently starts later than asked, so an index whose position
// the slot has confirmed past has lost the changes between: it is pending
// again, as are indexes without state. When some indexes hold state
// (restored from checkpoints, or from before a reconnect), the stream
// resumes from the oldest of their positions, and each table with pending
// indexes is copied under a temporary slot's snapshot while the stream
// goes on. When none does and some are pending, the slot is dropped and
// recreated, and every table copied under its snapshot before streaming
// starts.
//
// Either way the slot is not told more than it was until the copied
// indexes are durable (see Covered): their covered LSN is zero meanwhile.
func (r *Replicator) prepareSlot(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn, tables []*table) (start, floor indexer.LSN, syncs []tableSync, err error) {
	var confirmed *string
	qctx, cancel := r.bounded(ctx)
	defer cancel()
	// Only a slot claim found to be ours: one made since by another tool
	// makes createSlot fail, and is never dropped.
	err = conn.QueryRow(qctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1 AND `+ourSlot, r.cfg.Name).Scan(&confirmed)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil, err
	}
	if exists && confirmed != nil {
		slotAt, err := indexer.ParseLSN(*confirmed)
		if err != nil {
			return 0, 0, nil, err
		}
		r.recopyBehind(tables, slotAt)
		// With nothing to copy either (every index in error, waiting or
		// gone), the slot stays as it is.
		if holding, pending := r.split(tables); len(holding) > 0 || len(pending) == 0 {
			syncs, err := r.startSyncs(ctx, pending)
			return resumeFrom(holding, slotAt), slotAt, syncs, err
		}
	}
	if exists {
		r.log.Info("dropping the slot to take a fresh snapshot", "slot", r.cfg.Name)
		qctx, cancel := r.bounded(ctx)
		defer cancel()
		if _, err := dropSlot(qctx, conn, r.cfg.Name); err != nil {
			return 0, 0, nil, fmt.Errorf("dropping slot %s (is another vecside using it?): %w", r.cfg.Name, err)
		}
	}
	point, err := r.snapshot(ctx, repl, tables)
	return point, point, nil, err
}

// recopyBehind makes pending the entries whose position the slot has
// confirmed past. Entries in error need nothing.
func (r *Replicator) recopyBehind(tables []*table, slotAt indexer.LSN) {
	for _, t := range tables {
		for _, e := range t.entries {
			if state, _ := e.State(); state != indexer.StateError && e.Applied() < slotAt {
				r.recopy(e, "the slot has confirmed past the index's position", "confirmed", slotAt.String(), "applied", e.Applied().String())
			}
		}
	}
}

// recopy makes e pending: what it holds cannot be streamed forward, so its
// table is copied again. It is emptied at once, not served until then.
func (r *Replicator) recopy(e Index, why string, args ...any) {
	r.mu.Lock()
	again := !r.pending[e]
	r.pending[e] = true
	r.mu.Unlock()
	if again {
		r.log.Warn(why+"; copying its table again", append([]any{"index", e.Spec().Name}, args...)...)
		e.Copies().AbortSync(nil)
		e.Copies().BeginSync(nil, 0) // empties it; its table sync starts a copy of its own
	}
}

// resumeFrom is the oldest position of the holding entries, none of which
// the slot is past; entries in error need nothing, and without others the
// stream resumes where the slot is.
func resumeFrom(holding []Index, slotAt indexer.LSN) indexer.LSN {
	var positions []indexer.LSN
	for _, e := range holding {
		if state, _ := e.State(); state != indexer.StateError {
			positions = append(positions, e.Applied())
		}
	}
	if len(positions) == 0 {
		return slotAt
	}
	return slices.Min(positions)
}

// snapshot creates the slot and copies every table under its snapshot
// before anything is streamed.
func (r *Replicator) snapshot(ctx context.Context, repl *pgconn.PgConn, tables []*table) (indexer.LSN, error) {
	for _, t := range tables {
		if err := r.beginSyncs(ctx, t, t.entries, false); err != nil {
			return 0, err
		}
	}
	slot, err := createSlot(ctx, repl, r.cfg.Name, false, r.cfg.SlotTimeout)
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
			e.Copies().SetSyncPoint(point)
		}
	}
	for _, t := range tables {
		if err := r.copy(ctx, r.copyJob(slot.SnapshotName, t, t.entries), func() {}); err != nil {
			return 0, err
		}
	}
	return point, nil
}

func (r *Replicator) copyJob(snapshot string, t *table, entries []Index) copyJob {
	began, logged := time.Now(), time.Now()
	report := r.cfg.CopyProgress
	if report == nil {
		report = func(p CopyProgress) {
			if p.Phase == PhaseCopying && time.Since(logged) < 5*time.Second {
				return
			}
			logged = time.Now()
			attrs := []any{"table", p.Table, "rows", p.Rows}
			// A table never analyzed has no estimate.
			if p.Estimate > 0 {
				attrs = append(attrs, "of about", p.Estimate)
			}
			r.log.Info(string(p.Phase), append(attrs, "elapsed", p.Elapsed.Round(time.Millisecond).String())...)
		}
	}
	return copyJob{
		source: r.cfg.Source, snapshot: snapshot, table: t, entries: entries, readers: r.cfg.CopyReaders, stall: r.cfg.ReceiveTimeout,
		progress: func(phase Phase, rows, estimate int64) {
			report(CopyProgress{Table: t.qualified(), Phase: phase, Rows: rows, Estimate: estimate, Elapsed: time.Since(began)})
		},
	}
}

// CopyProgress is how far the copy of one table has gone.
type CopyProgress struct {
	Table    string // schema.table
	Phase    Phase
	Rows     int64 // rows read so far
	Estimate int64 // the planner's estimate of the table's rows; 0 if unknown
	Elapsed  time.Duration
}

// Phase is the step of a table's copy that a CopyProgress reports.
type Phase string

// The phases of a copy, in order: copying reports come about every
// second; building comes once the rows are read, while the indexes that
// train or link after the copy do so; done comes when they serve.
const (
	PhaseCopying  Phase = "copying"
	PhaseBuilding Phase = "building"
	PhaseDone     Phase = "copied"
)

// besideStream leaves a core to the stream: a copy that runs while
// changes are applied reads with one reader fewer than there are cores, so
// that encoding the copy's rows does not hold up the stream's.
func (r *Replicator) besideStream(job copyJob) copyJob {
	job.readers = max(1, min(job.readers, runtime.NumCPU()-1))
	return job
}

// copy runs a copy job, calls release (the snapshot is no longer
// needed), and, when the copy succeeded, ends the sync of its entries.
func (r *Replicator) copy(ctx context.Context, job copyJob, release func()) error {
	rows, estimate, err := job.run(ctx)
	release()
	r.stats.CopiedRows.Add(rows)
	if err != nil {
		return err
	}
	job.progress(PhaseBuilding, rows, estimate)
	for _, e := range job.entries {
		e.Copies().EndSync() // may build for a while: not under r.mu, which status updates take
		r.mu.Lock()
		delete(r.pending, e)
		r.mu.Unlock()
	}
	job.progress(PhaseDone, rows, estimate)
	return nil
}

// startSyncs creates a temporary slot for each table with pending
// entries, before the stream starts: its consistent point tells the stream
// which transactions the copy already holds.
func (r *Replicator) startSyncs(ctx context.Context, pending map[*table][]Index) ([]tableSync, error) {
	var syncs []tableSync
	for t, entries := range pending {
		if err := r.beginSyncs(ctx, t, entries, false); err != nil {
			return syncs, err
		}
		qctx, cancel := r.bounded(ctx)
		repl, err := connectReplication(qctx, r.cfg.Source)
		cancel()
		if err != nil {
			return syncs, err
		}
		syncs = append(syncs, tableSync{repl: repl})
		slot, err := createSlot(ctx, repl, fmt.Sprintf("%s_sync_%d", r.cfg.Name, t.oid), true, r.cfg.SlotTimeout)
		if err != nil {
			return syncs, err
		}
		point, err := indexer.ParseLSN(slot.ConsistentPoint)
		if err != nil {
			return syncs, err
		}
		for _, e := range entries {
			e.Copies().SetSyncPoint(point)
		}
		r.log.Info("copying a table for some indexes while the others stream", "table", t.qualified(), "sync_point", point.String())
		syncs[len(syncs)-1].job = r.besideStream(r.copyJob(slot.SnapshotName, t, entries))
	}
	if len(syncs) > 0 && r.cfg.BeforeCopy != nil {
		r.cfg.BeforeCopy()
	}
	return syncs, nil
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

// replicationApp is the application_name of the sidecar's replication
// connections, unless --source sets one.
const replicationApp = "vecside"

func connectReplication(ctx context.Context, source string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(source)
	if err != nil {
		return nil, configError{fmt.Errorf("--source: %w", err)}
	}
	cfg.RuntimeParams["replication"] = "database"
	// What pg_stat_replication shows, and check recognises (checker.slot).
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = replicationApp
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening a replication connection (the role needs the REPLICATION attribute): %w", err)
	}
	return conn, nil
}

// awaitVisible waits until transaction xid (32 bits, the stream's) is
// visible to new snapshots. The walsender may send a transaction once its
// commit record is flushed, a moment before Postgres makes the commit
// visible: a row read back in that moment is not found, and would be
// taken for one deleted since. The xid is widened to the xid8 of the
// snapshot's epoch (the one before, if that would put it at or past the
// snapshot's xmax: it committed, so it started before).
func awaitVisible(ctx context.Context, conn *pgx.Conn, xid uint32) error {
	const visible = `SELECT pg_visible_in_snapshot((CASE WHEN w >= m THEN w - 4294967296 ELSE w END)::text::xid8, s)
		FROM (SELECT s, m, (m >> 32 << 32) | $1::int8 AS w
			FROM (SELECT s, pg_snapshot_xmax(s)::text::int8 AS m FROM pg_current_snapshot() s) q) r`
	for xid != 0 {
		var ok bool
		if err := conn.QueryRow(ctx, visible, int64(xid)).Scan(&ok); err != nil {
			return fmt.Errorf("waiting for transaction %d to be visible: %w", xid, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for transaction %d to be visible: %w", xid, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func parseSystemID(s string) uint64 {
	var id uint64
	fmt.Sscan(s, &id)
	return id
}

// repairRow reads one row's vector from the table, for a change that
// referred to a vector the index does not have. The read sees a newer
// state than the stream position; later changes in the stream overwrite
// it, so the index still converges. It names the columns as the catalog
// calls them now: the stream may not have reached a later rename yet.
func repairRow(ctx context.Context, conn *pgx.Conn, t *table, e Index, key string, xid uint32) error {
	if err := awaitVisible(ctx, conn, xid); err != nil {
		return fmt.Errorf("reading row %s of %s: %w", t.keyType.FormatKey(key), t.qualified(), err)
	}
	var keyName, colName string
	err := conn.QueryRow(ctx, `SELECT k.attname, v.attname FROM pg_attribute k, pg_attribute v
		WHERE k.attrelid = $1 AND k.attnum = $2 AND NOT k.attisdropped AND v.attrelid = $1 AND v.attnum = $3 AND NOT v.attisdropped`,
		t.oid, t.key.attnum, t.vectors[e.Spec().Column].attnum).Scan(&keyName, &colName)
	if err != nil {
		return fmt.Errorf("naming the key and vector columns of %s: %w", t.qualified(), err)
	}
	// The xmin read pairs with the vector read; pg_current_wal_lsn(),
	// evaluated after the statement's snapshot was taken, is at or past
	// every commit that snapshot sees: the xmin is recorded once the
	// stream has been applied that far (see indexer's UpsertRead). A row
	// outside the row filter is not the index's, as if deleted.
	sql := fmt.Sprintf("SELECT %s, xmin, pg_current_wal_lsn() FROM %s%s",
		indexer.QuoteIdent(colName), t.qualified(), t.filter(fmt.Sprintf(" WHERE %s = $1::text::%s", indexer.QuoteIdent(keyName), t.keyType)))
	res := conn.PgConn().ExecParams(ctx, sql, [][]byte{[]byte(t.keyType.FormatKey(key))}, nil, nil, []int16{1}).Read()
	if res.Err != nil {
		return fmt.Errorf("reading row %s of %s: %w", t.keyType.FormatKey(key), t.qualified(), res.Err)
	}
	if len(res.Rows) == 0 {
		return nil // deleted since; the stream will say so
	}
	row := res.Rows[0]
	xmin, err := decodeXID(row[1])
	if err != nil {
		return fmt.Errorf("reading row %s of %s: %w", t.keyType.FormatKey(key), t.qualified(), err)
	}
	if len(row[2]) != 8 {
		return fmt.Errorf("reading row %s of %s: an LSN of %d bytes", t.keyType.FormatKey(key), t.qualified(), len(row[2]))
	}
	e.Stream().UpsertRead(key, decodeVector(e, row[0], true), xmin, indexer.LSN(binary.BigEndian.Uint64(row[2])))
	return nil
}

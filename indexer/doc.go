// Package indexer owns the set of live indexes of a sidecar and the
// vocabulary the other layers share: index definitions (Spec), search
// options, LSNs, the checkpoint container, and the admission of searches.
//
// # Entries
//
// Each index is an Entry: a Spec, an index of a registered kind holding
// the rows (flat, ivf or hnsw: see Kinds below), the
// set of table rows left out because their vector cannot be indexed
// (NULL, wrong dimension, NaN or infinite: counted, never fatal, indexed
// again as soon as a change fixes them), a lifecycle State (building →
// ready, or error), and the applied LSN.
//
// An Entry is made of parts with one job each:
//
//   - Applier (apply.go, xid.go) applies the stream: a transaction's
//     changes under the apply lock, and its id, recorded on the rows it
//     wrote at its commit (txBook holds what waits to be recorded);
//   - Syncer (sync.go) runs the copies of the table: the first, and the
//     rebuilds beside the serving index;
//   - Durability (durability.go) writes and loads checkpoints and keeps
//     what they cover (coverage);
//   - Clock (clock.go) is the applied LSN, which read-your-writes
//     searches wait for.
//
// What they share (the serving state searches read, the apply lock and
// the indexes it guards, the lifecycle) is the entry's core, which also
// routes each change between the serving index and the one a copy
// builds. Each part holds the core as a field (c), not embedded, so that
// a part's methods are the ones it declares and every reach into shared
// state reads as one. The Entry itself holds what a caller asks of the index as a
// whole: its definition and column types (Configure), its lifecycle,
// Search and Status, and the Clock's Applied and WaitApplied, which it
// embeds; it hands out the other parts by Stream, Copies and Durable.
// replicate asks for those three and the entry's own few methods through
// interfaces of its own.
//
// # Kinds
//
// What the indexer knows of an index kind comes from the one descriptor
// (kind.Kind) the kind registers in package indexer/kind: its name, the
// build options it takes and their validation, its default store, the
// per-query settings SET, SHOW and knn accept (probes for ivf, ef_search
// for hnsw, carried in SearchOptions.Settings), how many rows it trains
// on, how it is made and loaded, and what a benchmark sweeps. Kinds,
// ParseSpec, SearchOptions, DefaultOversample and the bench all derive
// from the registry; nothing else names a kind.
//
// The kinds register themselves, from their package's init, in the small
// package indexer/kind, which imports none of them; this package imports
// the built-in ones for that side effect (kinds.go). So the dependencies
// still point one way (kind ← flat, ivf, hnsw ← indexer), a program that
// imports the indexer gets every built-in kind, and the indexer's own
// tests use the kinds without an import cycle. A new kind is one package
// plus one import line in kinds.go; a kind of a test's own registers in
// that test's init, as bruteforce_test.go does, and every test that
// ranges over Kinds covers it, starting with the conformance suite
// (indexer/kindtest) that TestKindConformance runs against every
// registered kind.
//
// # Who waits for whom
//
// A search never holds a lock that the apply path waits for, and the apply
// path never waits for a search:
//
//   - A search loads the entry's serving state (state, index, dimension)
//     with one atomic load, and the kind searches without a lock: it pins
//     an epoch and reads immutable rows and copy-on-write blocks (see
//     indexer/store). It sees every change applied before it started and
//     returns no key deleted before it started; a row's key and codes are
//     read as one, because a row id is reused only after every search that
//     could see its old row has ended.
//   - Changes (Upsert, Delete, Move, Skip, Truncate) and the copy's rows
//     (CopyUpsert) serialise on the entry's apply lock, wmu, for as long as
//     routing the change and inserting an already encoded row take;
//     encoding happens before the lock. The kind's own writer mutex nests
//     inside it.
//   - The entry's mu guards bookkeeping (types, lifecycle, durability
//     counters) for a few field accesses at a time.
//
// The replication layer feeds an Entry row by row, opens each transaction
// with Begin (which says whether the entry still wants it) and moves the
// applied LSN at commit boundaries only, or to a keepalive's WAL end when
// no transaction is open, so that a client waiting for an LSN
// (WaitApplied) never sees half a transaction.
//
// # Copies: the first, and rebuilds
//
// An index is filled by a copy of its table taken under a snapshot while
// the stream goes on (a table sync): BeginSync (or BeginRebuild), then
// SetSyncPoint with the snapshot's LSN, the copy's rows through CopyUpsert,
// and EndSync. The kinds that train (IVF's k-means lists, coded flat's
// mean) train before the copy on a random sample of the table, so the copy
// encodes each row as it arrives and never holds the table twice; the
// copy's readers block while they encode (and, for hnsw, while the
// graph's backlog waits to be linked: see kind.Admitter), which is its
// backpressure.
//
// A change that commits at or after the snapshot point wins over the
// copy's row for its key; one that committed before is in the snapshot.
// Changes met before the point is known go to the new index too, and
// SetSyncPoint takes back those that turn out older. A first copy leaves
// the entry building (searches get ErrNotReady); a rebuild keeps serving
// the current index, which keeps following the stream, and swaps the new
// one in at EndSync. A failure raised during a copy survives its end.
//
// Rebuilds are how an index's structure follows its data: when a kind
// says it has drifted (NeedsRebuild: IVF lists trained for far fewer rows,
// or none; a mean taken over too few), the replication layer syncs the
// table into a new index (see WantsRebuild). Codes are encoded only from
// exact vectors read from the table, never from a reconstruction, so
// their error does not grow from one rebuild to the next. While it runs
// the entry holds two indexes.
//
// # Transaction ids
//
// Per row, an index records the xid that wrote the version whose vector
// it holds (4 bytes a row, in store.Keys), and a search returns it with
// each hit, so that a client finding the same xmin in the heap can skip
// fetching the vector. An xid is recorded only when that transaction's
// version of the row has exactly the row's vector: streamed changes at
// their Commit (BeginTx, Commit), the copy's rows with the xmin it read
// (CopyUpsert), rows read by key once the stream has caught up with the
// read (UpsertRead), an update that left the vector alone only onto a row
// whose xid was known (Unchanged). xid.go gives the reasoning.
//
// # Searches under control
//
// Indexer.Search admits a bounded number of searches at once (Limits: one
// per core by default, since searches are pure CPU work), queues a bounded
// number more until their deadline, and turns the rest away with
// ErrOverloaded. Every kind checks its context every few blocks of rows,
// so an abandoned search stops within about a millisecond of work.
//
// # Options
//
// One grammar everywhere: white-space separated key=value pairs, used by
// --index definitions, knn's options argument and SET vecside.<key>.
// SearchOptions holds the per-query vocabulary; unknown keys are errors.
//
// # Checkpoints
//
// WriteCheckpoint and ReadCheckpoint frame any kind's body with a header
// (index, kind, parameters, dimension, metric, the LSN covered, the
// source's system identifier, timeline, slot and database, and the OID of
// the table followed) and a CRC-32C trailer, written atomically. Format 3
// keeps the rows' xids (captured with the live rows, so each belongs to
// the row written), format 4 the recall calibration, format 5 the table's
// OID. A checkpoint is loaded only into the index it was written for: the
// same definition, source and table OID (Durability.SetTable), so that a
// table dropped and created again under its name is copied again rather
// than served from its predecessor's rows; files of formats before 5 have
// no OID to show and are refused alike. A reader checks the whole file
// before it parses the body, so a damaged file is refused whole.
//
// RunCheckpoints writes them by time and by change count. Taking one
// pauses the apply path only while the kind copies its set of live rows (a
// bit per row); the file is written after, from rows pinned against reuse.
// An entry whose table has no valid row yet writes a checkpoint without an
// index, so every entry's position is covered by construction. Each
// entry's covered LSN is what its last checkpoint reflects, or a later
// idle position recorded in a small state file when nothing changed since;
// Indexer.Covered, the minimum over healthy entries, is all the
// replication layer may confirm to Postgres.
//
// Errors a client can cause wrap one of the sentinels in errors.go, which
// the RPC layer maps to SQLSTATEs.
package indexer

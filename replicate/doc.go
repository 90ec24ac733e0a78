// Package replicate keeps indexes in sync with their tables through
// PostgreSQL's logical replication: one publication and one slot per
// sidecar, whatever the number of indexes.
//
// # Set-up
//
// Each index's table is checked against the catalog before anything is
// created: it must exist (or its index waits, see Tables' lives), its
// key column must be its replica identity (a primary key or REPLICA
// IDENTITY USING INDEX; FULL is refused because it would put every old
// vector in the WAL), and its columns must have supported types. An
// index whose definition contradicts its column (dims=N on a vector(M)
// or halfvec(M)) goes into the error state alone; the others are served.
// Then the publication is created, or its table list brought up
// to date, before the slot: a slot that decodes with a missing publication
// fails or loses changes. Its column list is the key plus the indexed
// vector columns: never less (the application's UPDATEs would fail),
// never more (documents and JSON would pass through the decoder for
// nothing).
//
// Columns are known by their attribute numbers, which a rename keeps, so
// indexes follow renamed columns. A Relation message carries no numbers,
// but lists the published columns in attribute-number order: a column's
// place in it is its rank among the published columns, whatever it is
// called now (a new name is logged). SQL issued later (a repair read)
// asks the catalog for the current names. After a restart, a definition
// that still names a renamed column finds it through the publication's
// column list, which holds attribute numbers too: the key as the table's
// replica identity, a vector column as the one listed column no other
// definition accounts for.
//
// Which column types are vectors, and the dimension a type modifier
// fixes (vector(n), halfvec(n); none for the arrays), come from
// pgvalue's table of vector types; values are decoded by it too, in
// pgoutput's binary and text forms and in the copy's binary rows.
//
// # Ownership
//
// Slot names are unique in the whole server, and another tool may have
// chosen the sidecar's name, so nothing is dropped or changed on the
// strength of a name (see claim): the slot is vecside's only if it is
// logical, in this database, decoded with pgoutput, and has vecside's
// publication beside it (which vecside makes first and drops last); the
// publication only if it carries Mark, the comment vecside writes when it
// creates one. A publication an older vecside made without the mark is
// adopted, and marked, if it lists exactly the indexes' tables and
// columns. Anything else of the name is refused with ErrNotVecside, whose
// message says whose it is and how to get out of its way, by Run,
// Teardown and Check alike; the slot is dropped only by a statement that
// repeats the test.
//
// # Initial copy
//
// The slot is created with EXPORT_SNAPSHOT. While the replication
// connection stays idle, a second connection imports that snapshot in a
// REPEATABLE READ transaction and copies the key and vector columns, and
// each row's xmin, with a binary COPY. The copy therefore shows exactly
// the rows committed before the slot's consistent point, and the stream
// starts right after it: nothing is lost or seen twice. Config.CopyProgress
// hears how far each copy has gone about every second (rows read against
// the planner's estimate, then the build of the indexes); without it, a
// log line every 5 s says so.
//
// # Transaction ids
//
// Each index records per row the xid that wrote the version it holds
// (see the indexer's xid.go): the copy's xmin, the Begin message's xid for
// streamed changes (recorded at Commit), the xmin of a row read by key
// together with pg_current_wal_lsn() (recorded once the stream has been
// applied that far). The source's system identifier, timeline and
// database name, from IDENTIFY_SYSTEM, go to ReportSource, for status.
//
// # Streaming
//
// pgoutput protocol version 1 with binary 'true' and messages 'true'.
// With version 1 a transaction is sent only after it committed, so changes
// are applied as they arrive; the applied LSN moves only at Commit (to the
// transaction's end), or to a keepalive's WAL end when no transaction is
// open, so that a client waiting for pg_current_wal_lsn() is released even
// when the newest WAL came from other tables. Every message type is
// parsed; one that does not parse is counted and skipped, never allowed to
// crash-loop the stream.
//
// UPDATEs that leave a TOASTed vector alone send it as 'u' (unchanged,
// no value): the stored vector is kept, and moved when the key changed (the
// old key then arrives in a 'K' tuple whose other columns are 'n', "not
// part of the identity", not NULL). A 'u' for a key the index does not
// have is answered by reading that row from the table. A 'u' otherwise
// passes the transaction's xid on to the row (Applier.Unchanged). Rows whose vector
// cannot be indexed (NULL, wrong length, NaN or infinite, a
// multi-dimensional array) are left out and counted until a change makes
// them valid.
//
// A Relation message whose key or vector column is no longer published,
// or has another type (ALTER COLUMN … TYPE, made with the table out of the
// publication), empties the indexes it can no longer feed as soon as a
// change reaches them, and ends the session: the next one resolves the
// table as it is now, publishes its columns again and copies it, at its
// new dimension; the other indexes resume where they were.
//
// # Positions
//
// Status updates carry write, flush and apply explicitly, at least every
// StatusInterval (shortened to half of wal_sender_timeout) and at once
// when a keepalive asks for a reply. Flush and apply are the covered LSN:
// what durable state reflects (Config.Durable), never less than where the
// slot already was, and so never zero: pglogrepl would replace a zero
// with the write position and confirm changes nothing has stored. An
// index in error holds nothing back; when every index is in error, what
// has been received is confirmed, so the slot retains no WAL for them.
//
// # Restarts, reconnects and new indexes
//
// At start, indexes load their checkpoints (Config.DataDir) and the stream
// resumes from the oldest position they hold. Each index is bound to its
// table's OID as the catalog resolves it (Checkpoints.SetTable), and a
// checkpoint records it: a checkpoint of another OID (the table was
// dropped and created again under its name) is not loaded, nor one of a
// format that records none. An index whose checkpoint is refused so, whose
// position the slot has confirmed past (Postgres silently starts later
// than asked: the changes between are gone), whose checkpoint was written
// for other column types, or whose columns the publication did not list,
// has its table copied again, on its own, as a new index's is; only when
// no index holds state is the slot recreated and every table copied under
// its snapshot. A reconnect that finds the table under another OID copies
// it again too. A Relation message that names the table (same OID) anew
// is followed: the status reports the new name.
// After a lost connection the replicator reconnects with backoff, resets
// its relation cache, and resumes from what the indexes have applied,
// skipping transactions each has already applied. A connection can also
// die without a word (a network partition): when the stream has been
// silent for half of ReceiveTimeout, a status update asks the server to
// answer, and after all of it the connection is presumed dead and made
// again, as Postgres's own walreceiver does. The same timeout bounds
// connecting, the queries that start a session, health checks, repair
// reads and a copy that stops receiving rows, so a session that meets a
// partition anywhere gives up and tries again. An index with no checkpoint
// is synced on its own: a temporary slot exports a snapshot, its table is
// copied (in parallel ctid ranges when large) while the stream goes on,
// transactions committed before the snapshot are skipped for it, and keys
// changed after it win over the copy. Such syncs run one at a time, so
// that several tables copied again at once (after a migration) take the
// memory and cores of one.
//
// The slot and the publication are checked every HealthInterval: an
// invalidated slot stops the replicator or, with OnSlotLost "resync",
// copies the tables again.
//
// # Tables' lives
//
// The stream says nothing of a table dropped, or of one created, so the
// health checks watch for them. An index is bound to its table's OID,
// and each session resolves its tables by that OID first, then by the
// name its definition gives: renamed, the table is still the index's,
// and one created under the old name is another. An index whose table
// does not exist, was dropped, or is not in the publication when the
// sidecar's role may not add it (a DBA-owned publication and a table the
// role does not own) is emptied and waits (indexer.StateWaiting), saying
// what for and, for the publication, the statement its owner runs; it
// holds nothing back, like an index in error. When a health check sees a
// table gone from the publication, or what a waiting index waits for
// come true, the session ends (errCatalogChanged) and the next one, at
// once, resolves every table again: the new table is copied on its own
// while the other indexes stream on from where they were. A definition
// that cannot be served (a key that is not the replica identity, a
// column dropped) puts only its indexes into the error state; only at
// the first start, with nothing left to serve, is it Run's error.
//
// # What it needs of an index
//
// The replicator drives each index through interfaces of its own, none
// of more than 12 methods: Index, the definition, column types and
// lifecycle, whose parts apply the stream (Stream), copy the table
// (Copies) and checkpoint it (Checkpoints). Config.Entries takes the
// indexer's entries, which provide them (index.go).
package replicate

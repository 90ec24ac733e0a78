// Package proxy speaks PostgreSQL's wire protocol to clients and to
// PostgreSQL, so that an application written for pgvector — in any
// language, through any driver or ORM — is accelerated by vecside with
// one change, its connection string. It passes every message through
// unchanged, except for the statements it can prove it answers exactly
// as PostgreSQL would: pgvector's
//
//	SELECT ... FROM items [WHERE ...] ORDER BY embedding <-> $1 LIMIT 10
//
// on a column a sidecar indexes with that metric. Those it runs upstream
// restricted to the sidecar's candidates,
//
//	SELECT ... FROM items WHERE (...) AND id = ANY($2) ORDER BY embedding <-> $1 LIMIT 10
//
// so that PostgreSQL itself computes the target list, the exact
// distances, the order and the encodings, under the client's own role:
// privileges and row-level security hold by construction, and no row
// comes back that PostgreSQL would not return. While fewer than LIMIT
// rows come back (a filter, rows deleted since) and the sidecar has more,
// it asks for more candidates and runs the statement again, a bounded
// number of times (see accelerate.go). recognize.go states the
// accepted grammar.
//
// # Decisions
//
// Two ways to run it, one proxy. vecside proxy, a command of its own,
// asks a sidecar over pgwire (Remote: heapfetch's Client.Candidates and
// vecside_status()). The proxy holds every application session: there, a
// sidecar restart (an upgrade, a crash, a re-snapshot) costs those
// sessions nothing but acceleration for a moment. It also scales and is
// placed apart (beside the application or beside PostgreSQL; one sidecar
// can serve several proxies, and a proxy can ask a shard group through
// heapfetch's Config), and its authentication is PostgreSQL's, not the
// sidecar's users file. The cost is a round trip to the sidecar per
// accelerated statement (docs/benchmarks, "The proxy in the sidecar's
// process"). vecside serve --proxy runs the same proxy in the sidecar's
// process (InProcess): a statement's candidates are a call into its
// indexer, with the same options, read-your-writes wait and xids as knn's,
// and no encoding of the vector; a sidecar restart then ends the
// sessions too. The Sidecar interface is all the proxy knows of either.
//
// A package beside rpc's server, not part of it: rpc serves its own SQL
// dialect from its own catalog and authenticates against its own users;
// the proxy serves nothing itself and relays authentication. What both
// share is how a connection is admitted before it authenticates
// (rpc/internal/pgstartup). Remote
// reuses heapfetch to ask for candidates (Client.Candidates: the knn call,
// failover between a shard's sidecars and their back-off); both use
// pgvalue for vectors.
//
// The parser is PostgreSQL's own (github.com/pganalyze/pg_query_go/v6),
// never regular expressions: what the proxy accepts is what PostgreSQL
// parses, and the restricted statement is the parse tree deparsed with
// one more condition. pg_query is C, so the package builds only with cgo
// (every file but this one carries the cgo build tag). The static image
// (deploy/Dockerfile, CGO_ENABLED=0) is the sidecar's and stays static:
// built without cgo, vecside proxy says that it needs cgo. The first cgo
// build of pg_query takes about 1 min 50 s on two shared cores (60 s of
// CPU); the build cache makes later ones instant.
//
// # Sessions
//
// Session mode: one upstream connection per client, opened when the
// client's StartupMessage arrives and sent it unchanged, so PostgreSQL
// decides who gets in (SCRAM, md5, trust, as its pg_hba.conf says for the
// proxy's address) and the session runs as the client's role. The
// authentication exchange is relayed message by message. Upstream the
// proxy speaks TLS as Config.Upstream's sslmode says (libpq's six modes,
// read by pgconn, and its hosts tried in turn; no sslmode is disable, for
// the reason below); to clients that ask,
// if Config.ClientTLS has a certificate (and ClientTLSRequired refuses
// those that do not ask, 28000); GSS encryption is declined. Relaying
// SCRAM across two TLS connections meets channel binding, which exists
// to detect a party in the middle: PostgreSQL over TLS offers
// SCRAM-SHA-256-PLUS, and a client on TLS binds to the proxy's
// certificate, which PostgreSQL refuses (a client that does not bind
// but could is refused too, as a downgrade). So with TLS on both sides
// SCRAM clients connect with channel_binding=disable; with TLS to
// clients only (the proxy beside PostgreSQL, over loopback or a Unix
// socket) every client works as it is. Authenticating clients in the
// proxy itself (PgBouncer's auth_query) would lift this; not yet.
// PostgreSQL's BackendKeyData is replaced by a key of the proxy's,
// and a CancelRequest with that key is sent on to the session's upstream
// backend with PostgreSQL's key; a wrong key costs the guesser a second,
// after its connection has given its slot back.
//
// After startup the session's messages are relayed one by one, flushed
// whenever the side they came from has nothing more buffered — so the
// proxy flushes when PostgreSQL and the client did. Simple and extended
// protocol, COPY both ways, notices, notifications and ParameterStatus
// pass as they are. The proxy tracks only what it needs: the transaction
// status of each ReadyForQuery, how many ReadyForQuery messages are owed
// (one per Query, Sync and FunctionCall), and whether an
// extended-protocol batch is open.
//
// # Parts
//
// A session (session.go) relays, and tracks what PostgreSQL owes its
// client; what the proxy may answer it hands to parts that each own one
// job:
//
//   - the statement book (book.go): the client's prepared statements the
//     proxy could answer, forgotten whenever something may have dropped
//     them;
//   - the probe (probe.go): what the session's earlier statements may
//     have changed, read in one round trip before an answer;
//   - the exchange (exchange.go): the session's own statements to
//     PostgreSQL and their replies while it answers;
//   - the answering (answer.go): one statement's rounds of candidates,
//     the replies the client gets, and the plan SHOW vecside.last_plan
//     reports (lastplan.go);
//   - asking (accelerate.go): the wait for candidates, which the client's
//     cancel request ends;
//   - the upstreams (upstream.go): where PostgreSQL is, as Config.Upstream
//     says, tried in turn.
//
// # Relaying
//
// A session over plain sockets (TCP or Unix, both sides) is relayed by
// the loop (loop.go), PgBouncer's design: one OS thread waits in
// epoll_wait for every such session's sockets, and the thread the kernel
// wakes reads the message, tracks it and writes it on itself, reading
// and writing the descriptors without blocking. The descriptors are
// duplicates taken out of Go's poller (detach), which would otherwise
// wake its own thread at every message as well. Relayed by goroutines,
// each message waited for Go's poller to wake a goroutine and the
// scheduler to run it, several times what the loop adds, which is about
// what PgBouncer adds (docs/benchmarks/README.md, "Passing statements
// through"). What the
// loop reads whole are the messages it must look into: from the client
// Query, Parse, Bind, Close and Terminate, from PostgreSQL ReadyForQuery
// and ParameterStatus; every other message, and any larger than
// MaxMessage, passes as it comes, a buffer at a time. A side is read only while what
// it sends can be written: a client that does not read its results stops
// its own session, as it would stop PostgreSQL, and no other.
//
// A client message the proxy may answer (mayAnswer: a Query
// mentioning a distance operator or SHOW vecside.last_plan, or a batch
// starting with a Parse of such a statement or a Bind of one it knows)
// hands the session to its goroutine, which answers as below with
// blocking reads and writes through Go's poller, on connections of its
// own over the same sockets, and hands it back; the loop leaves the
// sockets alone meanwhile. The goroutine keeps the session while the
// client's next messages are more of those, each within 10 ms
// (stickiness): a client asking for neighbours asks again at once, and
// handing the session over at each statement costs two thread wake-ups,
// and, with every processor busy, a wait for the runtime to take the
// loop thread's processor back. Notifications and notices wait that long
// at most. A session over TLS, on either side, is relayed by two
// goroutines, one each way, throughout. Stats counts the sessions the
// loop relayed.
//
// # The promise
//
// The proxy never gives an answer PostgreSQL would not give. Its
// invariants, each checked by the differential suite
// (differential_test.go: scripts in testdata/differential and seeded
// random sessions, run straight to PostgreSQL and through the proxy and
// compared by one oracle):
//
//   - It never changes a client's session. What it runs inside a session
//     cannot fail where the client's statement would not (the probe is
//     built of functions and catalog reads that cannot fail), and leaves
//     no name behind: its statements are prepared under a random name
//     and closed in the round trip that runs them. Nothing is kept across
//     statements where PostgreSQL reads anew: the restricted statement is
//     parsed again at each answer (constants such as a timestamp in the
//     session's time zone, the search_path, the table's columns now). A
//     statement the client prepared earlier is answered only if it holds
//     no literal besides the vector (its constants were read back then).
//   - An answer is bound to the table the sidecar follows, checked inside
//     the answering statement: its condition on the candidates holds only
//     where the statement's table name, as PostgreSQL resolves it in that
//     statement, is the OID of the table the sidecar follows
//     (recognize.go's restricted). A table that shadows it on the
//     search_path, one created under its name after a rename or a drop,
//     is read as no rows, and the statement passes through. The session's
//     database must be the sidecar's, and its server the sidecar's source
//     where the role may read the system identifier.
//   - Complete or pass through: the answer has LIMIT rows or the
//     client's statement runs unchanged. Rows the sidecar does not have
//     (NULL vectors, rows it has not applied yet, rows of tables that
//     inherit from the table) may belong to an answer short of rows; a
//     query vector for which distances may not be finite (a component
//     past 1e15, a zero vector under cosine) passes through; a table
//     others inherit from passes through unless the statement says ONLY;
//     an OFFSET is covered by asking for as many candidates again.
//     Approximation is only in which nearest rows come back.
//   - Only settings something set reach the sidecar (pg_settings'
//     source): a library's defaults do not.
//   - Waits are bounded: Config.CandidateWait, less under a shorter
//     statement_timeout, ended by the client's CancelRequest; then the
//     statement passes through. Only the sidecar's own trouble keeps
//     other sessions' statements from asking it for a while.
//   - Every qualified name in the targets and filter is a column of the
//     table (else it may call a function of the row); the key must be
//     readable by the role; SHOW vecside.last_plan says nothing the role
//     could not have seen.
//
// A filter that raises an error for some row (1/(id - 4000)) is
// evaluated on the candidates' rows only: the proxy's answer then fails
// where PostgreSQL evaluating it over every row would, and may succeed
// where it would fail, as with any index PostgreSQL itself uses.
//
// # Accelerating a statement
//
// Two shapes of request are answered, and only when nothing is owed: a
// simple Query holding one recognised statement, and an extended-protocol
// batch [Parse] Bind [Describe portal] Execute Sync of a recognised
// statement (with the vector a literal or a parameter, in text, or in
// binary as real[], double precision[] or pgvector's vector, whose OID,
// the extension's, the probe reads), which is what pgx in every
// exec mode, libpq's PQexecParams and PQexecPrepared (and so psycopg 3,
// its automatic prepare included) and node-postgres send; and only
// while the session's client_encoding is UTF8 and its
// standard_conforming_strings on (as ParameterStatus reports them), as
// the parser reads SQL and the deparser writes it. A batch starting with
// Parse or Bind when nothing is owed is held back until its Sync (at
// most six messages; a Flush sends it on as it came, as does any other
// shape). One batch with a Flush counts as owing nothing once answered:
// [Parse, Describe statement, Flush], as postgres.js sends before every
// Bind; while its replies are owed the session counts them, and once
// they have come, none an error, the Bind, Execute, Sync that follows
// is held as if it began the batch. The session then takes PostgreSQL's replies for itself
// (asynchronous ones still go to the client) and works upstream:
//
//  1. For a batch: the client's Parse, if any, is sent, and its
//     statement described, for the parameter types (the restricted
//     statement is prepared with them, and the query vector decoded
//     with them) and to have PostgreSQL's own error if the statement
//     fails to prepare or does not exist. A statement the client
//     prepared once is described once: later Binds of it are answered
//     with its types remembered, and its Describe, which still gives
//     PostgreSQL's error for a statement dropped since (or whose result
//     type changed), goes with the first round of step 4.
//  2. When a statement has passed through since the last time, or the
//     session has not probed this index's table yet: one probe
//     (probeSQL) says whether the transaction block has written (pass
//     through: the sidecar cannot see its rows), its isolation level (in
//     a block, only read committed is accelerated: an older snapshot
//     than the sidecar's would be answered with newer candidates), the
//     WAL position (read-your-writes: the sidecar is asked to have
//     applied it, min_lsn; upstream a hot standby, its replay position),
//     the database and the schemas of the search_path (which choose
//     among indexes of tables of one name), the settings the sidecar's
//     search takes (pgvector's hnsw.ef_search and ivfflat.probes, and
//     vecside.ef_search, vecside.probes and vecside.oversample over
//     them), statement_timeout, and of the table the role's privileges,
//     its columns and whether others inherit from it.
//  3. The sidecar is asked for LIMIT + OFFSET candidates (twice that with
//     an OFFSET); it failing or not answering in time passes the
//     statement through.
//  4. The restricted statement (a vector written in the text becomes one
//     more parameter, bound with the literal's text) is prepared under
//     the session's own random name, bound with the client's parameters
//     and formats plus the candidates (in text, so PostgreSQL infers the
//     key's type), described, executed, closed and synced, in one round
//     trip; then again with more candidates while too few rows come back
//     (twice as many as the rows matched so far say are needed), and
//     passed through if even then too few do. The client gets its
//     ParseComplete, the last round's BindComplete, RowDescription (if it
//     asked), rows and CommandComplete, and the ReadyForQuery, as for its
//     own statement. An error is PostgreSQL's own, without a position (it
//     would point into the restricted text).
//
// So a statement costs PostgreSQL, once the session is warm, one round
// trip and the parsing and execution of a statement over a few rows, and
// nothing of pgvector's index.
//
// Given up after step 1, the rest of the batch is sent on and its
// replies relayed. The proxy remembers which of the client's prepared
// statements it could answer, by name; a Close forgets one, a simple
// Query the unnamed one, and a statement whose text mentions DEALLOCATE
// or DISCARD all of them, lest SQL's PREPARE give a dropped one's name to
// another statement (a statement merely dropped fails step 1).
//
// Every statement recognised but passed through is counted by reason
// (Stats), and SHOW vecside.last_plan tells a session what became of its
// last one: the index and, per round, the candidates asked for and the
// rows that came back (nothing of a statement that failed), or why it
// passed through. The proxy
// answers it as a simple Query, and as an extended-protocol batch that
// only prepares, describes and runs it (the statement prepared is the
// proxy's own, which PostgreSQL never sees: a batch that mixes it with
// others passes through and fails there).
//
// The fast path. Reading a row's vector is most of what the restricted
// statement costs (a large vector is TOASTed: more index and heap reads,
// and a copy). Where the index's distances are exact (store=float:
// vecside_status().exact_distances) and the column holds single-precision
// floats (pgvector's vector, or real[]), the sidecar's candidates come
// with xids, as heapfetch's do: for each, the transaction that wrote the
// version of the row it measured. If the statement's targets do not show
// the vector (no reference to its column, no *) and the role has SELECT
// on the table (xmin takes it, where the statement may need only some
// columns), its sort key becomes
//
//	CASE WHEN xmin = <the row's xid> AND tableoid = <the table's>
//	          AND <timeline> = <the sidecar's>
//	     THEN <the sidecar's distance> ELSE embedding <-> $1 END
//
// (recognize.go's fastRestricted), so that PostgreSQL reads the vector
// only of a row written since the sidecar measured it (or of another
// table's row that shares its key and xid). xids count only on
// the server the sidecar follows: the session reads its system
// identifier once (pg_control_system(), if the probe finds that its role
// may run that and pg_control_checkpoint(), which the statement names)
// and asks only when it is the sidecar's source's, and the statement
// compares the timeline. The sidecar's exact distances are the same
// operations in the same order as distance.sql's over real[] (the same
// doubles); against a vector column, pgvector sums in single precision
// and the sidecar in double, so they agree to single precision's
// rounding, and two rows closer than that may come in the other order
// than pgvector's. SHOW vecside.last_plan says when a statement took it;
// docs/benchmarks ("The proxy's fast path") what it saves.
//
// # What a client can hold
//
// Limits: MaxConnections sessions, each with one upstream connection,
// taken when the connection begins to authenticate and refused with
// FATAL 53300 past it; before that, MaxStartups connections in startup,
// admitted as rpc admits them (pgstartup.Admission): a connection that
// has sent nothing gives its slot to a newer one, one address's own
// first past MaxStartupsPerPeer, so a flood of silent connections holds
// no session, no upstream connection and, for long, no slot; AuthTimeout
// to authenticate. PostgreSQL authenticates, so a connection
// authenticating holds a backend: one address authenticates at most
// MaxAuthenticatingPerPeer connections at a time, the others waiting
// their turn as connections that have not begun (evictable, holding no
// upstream connection), so that clients that never answer the password
// request hold that many backends and no other address's logins. A
// wrong cancel key's pause holds no slot. MaxMessage bounds a message
// the proxy reads whole (a Query, Parse or Bind, or a reply to an
// accelerated statement). Larger messages pass through in pieces
// through 32 KiB buffers, whatever their size, unaccelerated. What is
// parsed is bounded by its code (inspect.go): per statement, over the
// statements in flight in all sessions, and per session over the
// prepared statements kept to answer; past a bound, a statement passes
// through unparsed. An
// accelerated result holds at most LIMIT rows, LIMIT + OFFSET being at
// most 3,333 (the sidecar's cap on candidates), and 16 MiB (past it the
// statement passes through); a held batch, six messages. What a client
// prepares or pipelines is PostgreSQL's to hold, as it would be direct:
// the proxy remembers at most 1,000 of a session's statements as
// accelerable, and keeps none of its own prepared.
//
// # Not yet
//
// EXPLAIN of an accelerated statement. A sidecar index with a row filter
// (where=, one shard of several) must not be the only sidecar a proxy
// asks: it would answer from its shard alone. A filter that leaves fewer
// than LIMIT rows among every round's candidates passes through, where
// an allow-list of the keys it matches would answer it in one round.
package proxy

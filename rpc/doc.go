// Package rpc serves vecside's indexes over a subset of the PostgreSQL
// wire protocol (v3), so that any Postgres client — psql, pgx, psycopg,
// JDBC, and dblink inside Postgres itself — can ask for nearest neighbours
// without a client library:
//
//	SELECT * FROM knn('items_embedding', '[0.1,0.2,...]', 10);
//	SELECT id, distance FROM knn($1, $2, $3, 'oversample=2');
//	SELECT id, distance FROM knn($1, $2, $3, '', $4::bigint[]);  -- only these keys
//	SELECT * FROM vecside_status();
//	SET vecside.timeout = '2s';
//
// knn returns id, in the key column's own type, and distance (double
// precision), nearest first: candidates for the client to re-rank against
// the table, up to k × oversample rows (oversample defaults to the
// store's: 3, 2 or 1), not k. With with_xid=true it fills a third column, xid (bigint): the
// id of the transaction that wrote the version of the row the distance
// was computed from, where that distance is exact (store=float) and the
// xid known, NULL elsewhere; a client that finds the same xmin in the heap
// need not fetch the vector (see heapfetch). SELECT * includes xid when
// with_xid=true is SET or given as a literal options argument; Describe
// answers before parameters are bound, so with options passed as a
// parameter, select xid by name. vecside_status() reports the source's
// system_identifier and timeline, against which the client checks the
// heap server before trusting xids; xid_source=<system_identifier>/<timeline>
// makes knn return xids only from a search that ran entirely under that
// source. Its last two columns, table_oid (oid: the pg_class OID of the
// table the index follows, as the replicator resolved it) and
// database_name (text: current_database() of the source), NULL until
// known, say with system_identifier which table of which server the
// candidates are rows of. A target list of array_agg(column)s, as in
//
//	SELECT array_agg(id), array_agg(distance), array_agg(xid) FROM knn(...)
//
// makes one row of arrays of the function's rows in their order (NULLs
// for no rows), as PostgreSQL would: a caller that wants the candidates
// as arrays (the SQL helpers, through dblink) need not aggregate them
// itself. The package owns the protocol, a small SQL dialect and
// sessions, and counts what it answers (Server.Stats); searching is the
// Catalog's job (*indexer.Indexer), serving metrics is the caller's, and
// nothing here stores data.
//
// # Layers
//
// From the socket up:
//
//   - startup.go reads the startup packets with exact reads (nothing is
//     buffered before TLS is settled), starts TLS or declines it,
//     declines GSS encryption, negotiates the protocol version down to
//     3.0, and dispatches CancelRequests. auth.go authenticates:
//     SCRAM-SHA-256 (scram.go), with SCRAM-SHA-256-PLUS channel binding on
//     TLS, against the verifiers of a users file (users.go), or "trust".
//   - conn.go runs one goroutine per connection over a pgproto3.Backend:
//     it reads a message, answers it, and turns errors into ErrorResponses.
//     simple.go answers Query messages, extended.go the extended protocol
//     (Parse, Bind, Describe, Execute, Close, Sync, Flush); replies.go
//     buffers what goes back, held.go counts what a session holds.
//   - lexer.go and parser.go turn SQL into a statement (statement.go);
//     params.go types and decodes parameters; plan.go evaluates arguments
//     and fixes each statement's result columns; exec.go runs statements
//     against the session (session.go) and the Catalog; encode.go writes
//     values in text or binary.
//   - errors.go maps errors to SQLSTATEs, metrics.go counts requests and
//     searches for Server.Stats,
//     faults.go counts and samples client misbehaviour, limits.go holds
//     the limits below.
//
// # Connection lifecycle
//
//  1. Serve accepts a connection. It takes one of Limits.MaxStartups
//     slots for connections not yet authenticated: a free one, else the
//     slot of the connection that has waited longest before its startup
//     message, from the same address first past MaxStartupsPerPeer
//     (rpc/internal/pgstartup.Admission, which the proxy shares); only if every slot is authenticating is it refused
//     at once with FATAL 53300 before anything is read. Its goroutine then
//     has Limits.AuthTimeout to finish steps 2 to 5 (else FATAL 57014). A
//     failing accept (out of file descriptors) is retried after a pause
//     that grows to a second: it never ends Serve.
//  2. Startup packets are read one at a time. An SSLRequest is answered
//     'S' and the TLS handshake run before another byte is read (a
//     buffered reader could have taken plaintext sent after the request:
//     the CVE-2021-23214 class), or 'N' without a certificate;
//     GSSENCRequest is answered 'N'. A CancelRequest is handled, encrypted
//     or not, once the connection has given its slot back, and the
//     connection closed without a reply. A StartupMessage
//     for 3.x ends the loop; without TLS it is refused (FATAL 28000) if
//     Config.TLSRequired. A minor version above 0 or _pq_.* options get a
//     NegotiateProtocolVersion for 3.0.
//  3. Startup parameters are applied like SET (options' -c name=value
//     too); PostgreSQL parameters vecside lacks are ignored.
//  4. The client authenticates. With SCRAM-SHA-256 the server offers
//     SCRAM-SHA-256-PLUS first on TLS, bound to its certificate
//     (tls-server-end-point), and refuses a client that says it could
//     bind but thinks the server cannot (gs2 flag 'y': a downgrade). An
//     unknown user goes through the same exchange, with a salt derived
//     from the name and a secret, and fails at the end like a wrong
//     password: FATAL 28P01 either way, and the connection is closed.
//     md5 and cleartext passwords are never asked for. The connection
//     then becomes a session, one of
//     Limits.MaxConnections (the last ReservedConnections only for
//     Config.AdminUser; else FATAL 53300), gets a process ID and gives
//     its startup slot back.
//  5. The server sends AuthenticationOk, ParameterStatus for the
//     parameters drivers check (server_version 15.0, UTF8 encodings,
//     standard_conforming_strings on, DateStyle, TimeZone UTC, ...),
//     BackendKeyData, and ReadyForQuery.
//  6. Messages are answered until Terminate, EOF, a protocol violation
//     (FATAL 08P01), the client closing its connection while a request
//     runs (FATAL 08006, see below), Limits.IdleTimeout without a message
//     or without the client reading its replies (FATAL 57P05), or the
//     server stopping (FATAL 57P01).
//
// # What a client can hold
//
// Every way a client can make the server keep something is bounded, so
// that no client, authenticated or not, can exhaust the process:
// sockets (MaxConnections + MaxStartups), time before authenticating
// (AuthTimeout) and between messages (IdleTimeout), a message (1 MiB),
// replies not yet written (MaxReplyBuffer: past it the session writes
// and reads nothing more until the client has taken them), prepared
// statements and portals (MaxPrepared, MaxPreparedBytes; 54000), the
// statements of one simple Query (MaxQueryStatements; 54000), and a
// result (indexer.MaxCandidates rows). The lexer works as the parser
// asks for tokens, so parsing takes memory for the statements it keeps
// and time linear in the query, whatever the query is made of. With the
// defaults a session holds at most about 4.5 MiB. CancelRequests are
// checked 16 at a time, with a pause after a wrong key. Client faults
// (protocol violations, wrong cancel keys, refusals, timeouts) are
// counted in vecside_rpc_faults_total and logged at most once per kind
// every 10 seconds.
//
// A simple Query may hold several statements: each gets its own
// RowDescription, rows and CommandComplete, the first error skips the rest,
// and one ReadyForQuery ends it; an empty or comment-only query gets
// EmptyQueryResponse (pgx pings with "-- ping"). In the extended protocol
// an error discards messages up to Sync. Transaction commands are accepted
// as no-ops, but the status is tracked as PostgreSQL does: an error inside
// BEGIN leaves the block failed ('E', every statement refused with 25P02)
// until COMMIT or ROLLBACK.
//
// # Result types and Describe
//
// knn's id column has the index's key type, which is known when the index
// name is a literal. When it is a parameter, Describe of the statement
// reports the key type all indexes share, or NoData if they differ, in
// which case clients describe the portal (pgx does so by itself). A portal
// whose index has another key type than the one described is refused with
// 0A000 "cached plan must not change result type", as PostgreSQL refuses a
// prepared statement whose table changed: the client prepares again.
//
// # Deadlines and cancellation
//
// Every request runs under a context that a CancelRequest with the
// connection's key cancels (the key is compared in constant time; wrong
// keys cost the guesser a pause) and that ends when the server stops.
// Calls into the Catalog also run under the search timeout (SET
// vecside.timeout, or knn's timeout= option, default 30s). A Catalog
// that ends its calls soon after their context does (Config.PromptCatalog,
// as the sidecar's indexer does: its searches check the context, its
// waits select on it, and a search takes no lock) is called on the
// connection's own goroutine. Any other is called on a goroutine the
// request stops waiting for when the context ends: the client is
// answered 57014 at the deadline even if the index does not check its
// context. The deadline matters for dblink, which cannot interrupt a
// call on PostgreSQL 15; the goroutine costs a hand-off between threads
// per call (see callCatalog).
//
// Nothing reads the socket while a request runs, so a client that just
// closes its connection (a backend that exits, a killed process) would
// otherwise leave its search running. While a call into the Catalog
// runs, the server therefore checks the socket every 5 ms (a timer: a
// shorter call costs nothing more) without reading from it, as
// PostgreSQL's client_connection_check_interval does: a poll for
// POLLRDHUP, which also sees a close behind queries the client
// pipelined. A client gone cancels the request's context, and the
// connection ends without running what it had pipelined. This needs
// Linux; elsewhere such a search runs until it ends or times out.
//
// A cancelled, timed-out or abandoned search stops using the CPU at the
// index's next check of its context: as it scans for the exact flat
// index, before each scan for the quantized kinds.
//
// # Compatibility
//
// Supported: SELECT [* | col, ...] FROM knn(index, vector, k[, options[, allow]])
// and SELECT [* | col, ...] FROM vecside_status(), each with [WHERE col op
// literal [AND ...]] [ORDER BY col [ASC|DESC], ...] [LIMIT n|ALL] [OFFSET
// n] over any of its columns (op: = <> != < <= > >= IS [NOT] NULL;
// literals, not parameters, in these clauses), SELECT <integer>, SELECT
// version() (which names vecside and its build), SET / SHOW / RESET of vecside.<option> and of the parameters
// clients set (client_encoding must be UTF8), RESET ALL, BEGIN / START
// TRANSACTION / COMMIT / END / ROLLBACK / ABORT, DISCARD ALL, DEALLOCATE.
// Keywords are case-insensitive; arguments are literals (a doubled quote
// escapes a quote; E'…' strings take backslash escapes, as format('%L')
// writes them) or $n parameters, optionally cast ($2::real[]). Vectors are text
// ([1,2,3] or {1,2,3}; cast to vector or halfvec, or sent as text), binary
// real[] / double precision[], or bytea holding a binary format: a
// real[]'s or double precision[]'s as array_send writes it, or a pgvector
// vector's or halfvec's as vector_send and halfvec_send do (the first
// four bytes tell them apart: 0 or 1 dimensions for an array, d << 16 for
// pgvector's d dimensions, then the length: 2 or 4 bytes an element),
// given as a literal '\x…'::bytea in bytea's hex form or as a bytea
// parameter in either format. A '…'::halfvec literal is rounded to half
// precision as pgvector's cast rounds it, and every query against a
// halfvec column is (see pgvalue.VectorType.Round): its distances are
// those of pgvector's operators on halfvec values. The SQL helpers send
// the query so: encode(vector_send(…), 'hex') costs Postgres far less
// than printing each float as text, and bytes decode faster than numbers
// parse. A malformed or wrongly sized one is 22023. k is an
// integer in text or binary. allow, the keys a filtered search may
// return (an allow-set: a pre-filter, the keys a filter selected in the
// table), is an array of the key's type (bigint[], integer[], smallint[],
// uuid[]; integers of any width serve any integer key) or of text
// (text[], varchar[]) in the keys' text form, binary or text
// ('{1,2,3}'); it cannot travel in the options string, whose grammar
// splits on spaces. An empty array allows nothing. It holds at most
// MaxAllowKeys (65,536) keys, else 54000, and the whole Bind message
// stays within the 1 MiB message cap (65,536 bigint keys take 768 KiB); a
// NULL key is 22004, a malformed array or one whose elements cannot be
// the index's keys 22P02. Results are text or binary per column, for
// every type returned (int2/4/8, uuid, text, varchar, float8, pg_lsn).
//
// Not supported: tables, expressions, OR, joins and the rest of SQL (0A000
// or 42601), COPY, function calls, SET LOCAL, dollar quoting, GSSAPI
// encryption, client certificates, direct TLS (PostgreSQL 17's
// sslnegotiation=direct). Errors keep the connection usable; SQLSTATEs: 22023
// bad vector, option or k, 42704 unknown index or parameter, 55000 index
// not ready, 57014 cancelled or timed out, 53000 too many searches at
// once (retrying after a pause is safe), 54000 a limit of the session,
// 42601 syntax, 0A000 unsupported, 08P01 protocol violation, XX000
// internal. FATAL: 28P01 wrong password or unknown user, 28000 TLS
// required, 53300 too many connections, 57P05 idle too long, 57014
// authentication too slow.
package rpc

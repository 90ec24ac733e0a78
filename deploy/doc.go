// Package deploy holds what runs vecside beside a database: the SQL that
// vecside installs in Postgres (embedded, see DistanceSQL, HelpersSQL and
// Install), and the files for running the server:
//
//   - Dockerfile builds a static binary (CGO_ENABLED=0) and copies it onto
//     distroless/static, with the data directory as a volume owned by the
//     user it runs as, pgwire and the probes listening beyond loopback and
//     /metrics on it.
//   - compose.yaml runs PostgreSQL 15 with the settings of
//     postgresql.vecside.conf and compose/init.sql (the role, a database,
//     a table) beside vecside configured by vecside.yaml.
//   - kubernetes/vecside.yaml is a StatefulSet: each pod's --name is its
//     own name (vecside-0 becomes the slot vecside_0), its checkpoints on
//     its own volume claim, readiness on /readyz and liveness on /healthz
//     of --probes-listen, memory sized by the rule in docs/indexes.md; a
//     Service for clients and a headless one for the pods.
//   - systemd/vecside.service runs it hardened, with its state directory
//     as --data-dir, settings from vecside.yaml and an environment file.
//   - postgresql.vecside.conf holds the server settings vecside needs and
//     why.
//
// files_test.go checks these against the binary itself: every flag and
// VECSIDE_* variable they use is one that serve --help lists, ports and
// paths agree with the listen addresses, the binary is static, and a
// running serve answers the probe paths the manifests name.
//
// distance.sql defines exact distances over real[] with pgvector's
// semantics (vecside.l2_distance as <->, vecside.cosine_distance as <=>,
// vecside.negative_inner_product as <#>), for databases without pgvector:
// the SQL helpers re-rank with them, and tests use them as the ground
// truth.
//
// helpers.sql lets SQL ask the sidecar, through contrib dblink, which
// works on primaries and hot standbys alike:
//
//   - vecside.candidate_arrays(index, query_bytes, k, NULL::keytype[,
//     options]) is the one SECURITY DEFINER function, owned by the
//     NOLOGIN role vecside_owner, whose user mapping of the dblink_fdw
//     server vecside_sidecar holds the sidecar's password. It does only
//     the dblink call, over one named connection per backend made again
//     once after a sidecar restart, with every value quoted by
//     format('%L') (the query's hex digits, which need no quoting, as
//     they are) and the statement's remaining statement_timeout (30 s
//     without one) as the sidecar's timeout: dblink cannot be
//     interrupted on PostgreSQL 15, so a wait for min_lsn is asked for in
//     slices of 250 ms, between which a cancel is seen. It refuses a
//     session user without SELECT on the key and vector columns, and one
//     under row-level security unless the index was opted in
//     (vecside.indexes.allow_rls). It returns the candidates as three
//     arrays (ids, distances, xids), which a search takes in one
//     PL/pgSQL assignment; vecside.candidates(index, query, k,
//     NULL::keytype[, options]) returns them as rows for a real[] query,
//     a SQL function the planner inlines where the query is a parameter
//     or a column (not a scalar subquery, which PostgreSQL does not
//     inline).
//   - vecside.search(index, query, k, NULL::keytype[, options]) and
//     vecside.search_rows(index, query, k, NULL::table[, options]) are
//     SECURITY INVOKER: they read the table's rows among the candidates
//     under the caller's privileges and row-level security, compute exact
//     distances in SQL, and ask for more candidates (up to 10,000) while
//     rows the caller cannot see leave fewer than k.
//   - vecside.indexes registers the indexes with their tables and column
//     types; vecside.set_sidecar and vecside.register_index configure.
//     A trigger on it (re)writes vecside.search, vecside.search_rows and
//     vecside.candidate_arrays (vecside.write_searches) with a branch per
//     index that has its row (table, columns, key type, metric) written
//     in, and dblink's schema: every statement a search runs is static
//     SQL that PL/pgSQL plans once per session, with no catalog or
//     pg_settings read beyond the table's row-level security flags and
//     the privilege checks. After
//     renaming an indexed table or column, run SELECT
//     vecside.write_searches() (or install again).
//   - The query vector travels to the sidecar as bytes in hex
//     (pgvector's vector_send where pgvector is installed at install
//     time, else array_send), not as text printed a float at a time; a
//     search of a vector column sends the query it already converted for
//     the re-rank.
//   - Where the sidecar's distances are exact (store=float), it also
//     returns the xid of each candidate's row version, and
//     vecside.search reads a row's vector only where its xmin differs,
//     as heapfetch's fast path does. xids are asked only for an index
//     registered with exact distances (vecside.indexes.exact_distances,
//     from vecside_status() or the --index spec), only of a sidecar
//     whose source is this server (its system identifier, read once per
//     session into the setting vecside.system_identifier, and its
//     timeline), and not for a session user under row-level security:
//     which transaction wrote a row it cannot read is not its to learn.
//     xmin is read only by a role with SELECT on the table, as a column
//     grant does not cover it. For real[] columns the sidecar's distance
//     is the one distance.sql computes, to the bit; pgvector's operators
//     accumulate in single precision, so for a vector or halfvec column
//     such a distance may differ from <->'s in the last digits.
//
// register_index accepts the vector column types of pgvalue's table
// (pgvector's vector and halfvec, real[], double precision[]);
// TestHelpersKnowTheVectorTypes holds its check to that table. A halfvec
// column is re-ranked with pgvector's operators, the query cast to
// halfvec once per call; the sidecar rounds it alike.
//
// Nothing is granted to PUBLIC, dblink's functions included: the role
// vecside_user is what a DBA grants. What remains visible to a role that
// may call vecside.candidates directly on an index opted in for
// row-level security: the keys and approximate distances of the nearest
// rows, visible or not.
package deploy

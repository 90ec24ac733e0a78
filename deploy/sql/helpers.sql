-- SQL helpers that ask a vecside sidecar for nearest-neighbour candidates
-- from inside PostgreSQL, through contrib dblink, and re-rank them against
-- the table. Run after distance.sql, as a superuser (dblink is not a
-- trusted extension); it can be run again safely. Then set the sidecar
-- with vecside.set_sidecar(...) and register indexes with
-- vecside.register_index(...): `vecside sql install` does all three.
--
-- Who may search is a GRANT of the role vecside_user; nothing is granted
-- to PUBLIC. Raw candidate distances are an oracle over rows a role may
-- not be allowed to read, so:
--   * vecside.candidates (SECURITY DEFINER, owned by the NOLOGIN role
--     vecside_owner, the only role whose user mapping holds the sidecar's
--     password) does only the dblink call, and only for a session user
--     with SELECT on the index's key and vector columns, and, where
--     row-level security applies to that user, only if the index was
--     opted in (vecside.indexes.allow_rls);
--   * vecside.search and vecside.search_rows (SECURITY INVOKER) re-rank
--     the candidates against the table under the caller's own privileges
--     and row-level security. They are written per index from
--     vecside.indexes (vecside.write_searches, run by a trigger on it),
--     so that every statement on a search's path is static SQL.

CREATE EXTENSION IF NOT EXISTS dblink;

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'vecside_owner') THEN
    CREATE ROLE vecside_owner NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'vecside_user') THEN
    CREATE ROLE vecside_user NOLOGIN;
  END IF;
END $$;

-- dblink's functions are executable by PUBLIC by default: any role could
-- then reuse the helpers' named connection, which is logged in to the
-- sidecar. Only vecside_owner keeps them.
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT d.objid::regprocedure FROM pg_catalog.pg_depend d
           JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
           WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND e.extname = 'dblink'
             AND d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
  LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO vecside_owner', f);
  END LOOP;
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO vecside_owner',
    (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink'));
END $$;

REVOKE ALL ON SCHEMA vecside FROM PUBLIC;
GRANT USAGE ON SCHEMA vecside TO vecside_owner, vecside_user;

-- The indexes the helpers may ask for, as the sidecar names them, with
-- their tables. allow_rls opts an index in for roles under row-level
-- security: they then learn the keys and approximate distances of
-- candidates they cannot read (vecside.candidates), though vecside.search
-- still returns only rows they can. exact_distances says the sidecar's
-- distances are exact (store=float), so that they come with xids worth
-- asking for.
CREATE TABLE IF NOT EXISTS vecside.indexes (
  name          text PRIMARY KEY,
  tbl           regclass NOT NULL,
  key_column    name NOT NULL,
  key_type      regtype NOT NULL,
  vector_column name NOT NULL,
  vector_type   regtype NOT NULL,
  metric        text NOT NULL CHECK (metric IN ('l2', 'cosine', 'ip')),
  allow_rls     boolean NOT NULL DEFAULT false
);
ALTER TABLE vecside.indexes ADD COLUMN IF NOT EXISTS exact_distances boolean NOT NULL DEFAULT true;
REVOKE ALL ON vecside.indexes FROM PUBLIC;
GRANT SELECT ON vecside.indexes TO vecside_owner, vecside_user;

-- register_index records an index of the sidecar; the column types are
-- read from the catalog.
DROP FUNCTION IF EXISTS vecside.register_index(text, regclass, name, name, text, boolean);
CREATE OR REPLACE FUNCTION vecside.register_index(index_name text, tbl regclass, key_column name,
  vector_column name, metric text, allow_rls boolean DEFAULT false, exact_distances boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE kt regtype; vt regtype;
BEGIN
  SELECT a.atttypid INTO kt FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = key_column AND NOT a.attisdropped;
  SELECT a.atttypid INTO vt FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = vector_column AND NOT a.attisdropped;
  IF kt IS NULL OR vt IS NULL THEN
    RAISE EXCEPTION 'table % has no column %', tbl, CASE WHEN kt IS NULL THEN key_column ELSE vector_column END
      USING ERRCODE = 'undefined_column';
  END IF;
  -- The types of pgvalue's table (deploy's tests hold these lists to it):
  -- the arrays by name, pgvector's types in whatever schema it is in.
  IF vt::text NOT IN ('real[]', 'double precision[]') AND pg_catalog.format_type(vt, NULL) !~ '(^|\.)(vector|halfvec)$' THEN
    RAISE EXCEPTION 'column %.% is %, not vector, halfvec, real[] or double precision[]', tbl, vector_column, vt
      USING ERRCODE = 'datatype_mismatch';
  END IF;
  INSERT INTO vecside.indexes VALUES (index_name, tbl, key_column, kt, vector_column, vt, metric, allow_rls, exact_distances)
  ON CONFLICT (name) DO UPDATE SET tbl = EXCLUDED.tbl, key_column = EXCLUDED.key_column, key_type = EXCLUDED.key_type,
    vector_column = EXCLUDED.vector_column, vector_type = EXCLUDED.vector_type, metric = EXCLUDED.metric,
    allow_rls = EXCLUDED.allow_rls, exact_distances = EXCLUDED.exact_distances;
END $$;

-- set_sidecar points the helpers at a sidecar: a dblink_fdw foreign
-- server with timeouts and keepalives (dblink cannot interrupt a call on
-- PostgreSQL 15: the sidecar enforces the deadline, and these bound a
-- dead network), and vecside_owner's user mapping with the password.
CREATE OR REPLACE FUNCTION vecside.set_sidecar(host text, port integer, sidecar_user text, password text,
  sslmode text DEFAULT 'prefer', sslrootcert text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DROP SERVER IF EXISTS vecside_sidecar CASCADE;
  EXECUTE format('CREATE SERVER vecside_sidecar FOREIGN DATA WRAPPER dblink_fdw OPTIONS (host %L, port %L, dbname %L,
    sslmode %L, connect_timeout %L, keepalives %L, keepalives_idle %L, keepalives_interval %L, keepalives_count %L,
    tcp_user_timeout %L, application_name %L%s)',
    host, port::text, 'vecside', sslmode, '5', '1', '30', '10', '3', '10000', 'vecside_sql',
    CASE WHEN sslrootcert IS NULL THEN '' ELSE format(', sslrootcert %L', sslrootcert) END);
  GRANT USAGE ON FOREIGN SERVER vecside_sidecar TO vecside_owner;
  EXECUTE format('CREATE USER MAPPING FOR vecside_owner SERVER vecside_sidecar OPTIONS (user %L, password %L)',
    sidecar_user, password);
END $$;

-- What earlier versions of this file created and this one does without.
DROP FUNCTION IF EXISTS vecside.index_info(text, regtype, boolean), vecside.rerank_sql(vecside.indexes),
  vecside.search_keys(vecside.indexes, real[], integer, text);

-- candidate_arrays asks the sidecar for the k nearest keys of a query in
-- an index, with their approximate distances, and where a distance is
-- exact (store=float) the id of the transaction that wrote the version of
-- the row it was computed from (knn's xid): a row whose xmin is that xid
-- has that distance, and its vector need not be read. It returns them as
-- three arrays, nearest first (an xid NULL where none came), as the
-- sidecar aggregates them (array_agg over knn), so that a search takes
-- them in one assignment, not a query over a set of rows. The query
-- is the vector's bytes: pgvector's vector_send where pgvector is
-- installed (half the bytes of array_send), which Postgres writes far
-- faster than it prints each float, sent in hex digits. xids are asked
-- for only from a sidecar whose source is this server (knn's xid_source:
-- its system identifier, read once per session and kept in the setting
-- vecside.system_identifier, and its timeline), only where its distances
-- are exact (vecside.indexes.exact_distances), and not for double
-- precision[] columns, which the sidecar holds rounded to float32, nor
-- for a session user under row-level security. A session could set
-- vecside.system_identifier to another server's: that misleads only its
-- own searches. It runs as vecside_owner and does nothing else: one
-- named dblink connection per backend, made again once if the sidecar
-- restarted; the statement's remaining statement_timeout is the
-- sidecar's timeout (30 s without one), and a wait for min_lsn is asked
-- for in slices of 250 ms, so that a cancel ends it within a slice though
-- dblink cannot be interrupted on PostgreSQL 15; every value sent is
-- quoted with format('%L') but the query's hex digits, which need no
-- quoting. On a hot standby the sidecar is asked to have applied what the
-- standby replayed first (min_lsn), unless the caller says.
--
-- vecside.write_searches writes it, with each index's row of
-- vecside.indexes written in (no query reads it) and dblink's schema
-- (@dblink@); the result's key type is picked by a branch per type the
-- sidecar serves. vecside.candidates is the same as a set of rows, for a
-- real[] query. Installing pgvector (or moving dblink) later takes
-- installing again.
DROP FUNCTION IF EXISTS vecside.candidates(text, real[], integer, anyelement, text);

-- distance_sql is the SQL of the exact distance between the vector
-- expression vec and the query expression query (a real[]), as the
-- index's metric defines it: pgvector's operators for a vector or halfvec
-- column (the query cast to the column's type, as pgvector compares
-- them), the functions of distance.sql for real[] and double precision[].
CREATE OR REPLACE FUNCTION vecside.distance_sql(ix vecside.indexes, vec text, query text)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE ext name;
BEGIN
  IF ix.vector_type IN ('real[]'::regtype, 'double precision[]'::regtype) THEN
    RETURN format('vecside.%s(%s::real[], %s)',
      CASE ix.metric WHEN 'l2' THEN 'l2_distance' WHEN 'cosine' THEN 'cosine_distance' ELSE 'negative_inner_product' END, vec, query);
  END IF;
  SELECT n.nspname INTO ext FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector';
  RETURN format('(%s OPERATOR(%I.%s) %s::%s)', vec, ext,
    CASE ix.metric WHEN 'l2' THEN '<->' WHEN 'cosine' THEN '<=>' ELSE '<#>' END, query, ix.vector_type);
END $$;

-- write_searches (re)creates vecside.search, vecside.search_rows,
-- vecside.candidate_arrays and vecside.candidates from vecside.indexes,
-- with a branch per index that has its table, columns, key type and
-- metric written in: static SQL that PL/pgSQL plans once per session,
-- where dynamic SQL was parsed and planned on every call. A trigger runs
-- it whenever vecside.indexes changes; after renaming an indexed table or
-- column, run it again (SELECT vecside.write_searches()).
--
-- Each branch asks vecside.candidate_arrays for k keys (with the query's
-- bytes made once per call), reads those rows under
-- the caller's privileges and row-level security, and keeps the k nearest
-- by exact distance; while rows the caller cannot see (or rows gone since)
-- leave fewer than k, it asks for four times as many, up to 10,000.
CREATE OR REPLACE FUNCTION vecside.write_searches()
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ix vecside.indexes;
  i integer := 0;
  dbl name := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink');
  vec name := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector');
  query_bytes text;
  index_rows text := '';
  vars text := '';
  key_branches text := '';
  row_branches text := '';
  q text;
  dist text;
  -- The k nearest of the candidates' rows, given the distance (%4$s),
  -- nearest first: a plain aggregate over one subquery reads its rows in
  -- the subquery's order, so the aggregates need no sort of their own.
  heap constant text := $h$
        SELECT array_agg(r.id), array_agg(r.d) INTO found%1$s, dists
        FROM (SELECT s.id, s.d FROM (SELECT t.%2$I AS id, %4$s AS d FROM %3$s t WHERE t.%2$I = ANY (ca.ids) OFFSET 0) s
              WHERE s.d IS NOT NULL ORDER BY s.d, s.id LIMIT k) r;$h$;
  widen text;
  body text;
  no_index constant text := $r$  RAISE EXCEPTION 'vecside index "%" does not exist', index_name USING ERRCODE = 'undefined_object',
      HINT = 'the indexes are listed in vecside.indexes; vecside sql install registers those the sidecar has';$r$;
  arrays_fn constant text := $t$
CREATE OR REPLACE FUNCTION vecside.candidate_arrays(index_name text, query bytea, k integer, key_type anyelement,
  options text DEFAULT '', OUT ids anyarray, OUT distances double precision[], OUT xids bigint[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  ix vecside.indexes;
  table_rls boolean;
  table_force_rls boolean;
  table_owner oid;
  who name := session_user;
  opts text := coalesce(options, '');
  standby boolean := pg_is_in_recovery();
  rls boolean := false;
  sysid text;
  deadline timestamptz;
  waits boolean;
  slice_ms bigint;
  reconnected boolean := false;
  detail text;
  query_hex text;
  remote text;
BEGIN
  IF index_name IS NULL OR query IS NULL OR k IS NULL THEN
    RAISE EXCEPTION 'vecside.candidates: the index, query and k must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- The index's row is written in; its table's row-level security
  -- flags are read, and the roles only where they are on.
@index@
  SELECT c.relrowsecurity, c.relforcerowsecurity, c.relowner INTO table_rls, table_force_rls, table_owner
  FROM pg_class c WHERE c.oid = ix.tbl;
  IF pg_typeof(key_type) <> ix.key_type THEN
    RAISE EXCEPTION 'vecside index % gives % keys, not %', ix.name, ix.key_type, pg_typeof(key_type)
      USING ERRCODE = 'datatype_mismatch', HINT = format('pass NULL::%s', ix.key_type);
  END IF;
  IF NOT (has_column_privilege(who, ix.tbl, ix.key_column, 'SELECT')
          AND has_column_privilege(who, ix.tbl, ix.vector_column, 'SELECT')) THEN
    RAISE EXCEPTION 'permission denied for table %', ix.tbl USING ERRCODE = 'insufficient_privilege',
      DETAIL = format('vecside index %s needs SELECT on %s(%s, %s)', ix.name, ix.tbl, ix.key_column, ix.vector_column);
  END IF;
  IF table_rls THEN
    rls := EXISTS (
      SELECT FROM pg_roles r
      WHERE r.rolname = who AND NOT r.rolsuper AND NOT r.rolbypassrls
        AND (table_force_rls OR NOT pg_has_role(who, table_owner, 'USAGE')));
    IF rls AND NOT ix.allow_rls THEN
      RAISE EXCEPTION 'row-level security applies to % on %, and vecside index % is not opted in', who, ix.tbl, ix.name
        USING ERRCODE = 'insufficient_privilege',
        HINT = 'candidates would show keys and distances of rows the role cannot read; a DBA may allow it: UPDATE vecside.indexes SET allow_rls = true WHERE name = ...';
    END IF;
  END IF;
  IF opts <> '' AND opts ~ '(^|\s)timeout=' THEN
    RAISE EXCEPTION 'the sidecar''s timeout is what remains of statement_timeout' USING ERRCODE = 'invalid_parameter_value',
      HINT = 'SET statement_timeout instead of passing timeout=';
  END IF;
  IF standby AND opts !~ '(^|\s)min_lsn=' THEN
    -- On a hot standby: wait (within the timeout) until the sidecar, which
    -- follows the primary, has applied what this standby has replayed, so
    -- that no row the standby sees is missing from the candidates.
    opts := opts || format(' min_lsn=%s', pg_last_wal_replay_lsn());
  END IF;
  -- Not under row-level security: which transaction wrote a row the
  -- role cannot read is not for it to learn.
  IF ix.exact_distances AND NOT rls AND ix.vector_type <> 'double precision[]'::regtype AND (opts = '' OR opts !~ '(^|\s)(with_xid|xid_source)=') THEN
    -- Only a number: the session sets this, and what it holds is sent
    -- among the options (another timeout= must not get in that way).
    sysid := substring(current_setting('vecside.system_identifier', true) FROM '^-?[0-9]+$');
    IF sysid IS NULL AND has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') THEN
      sysid := set_config('vecside.system_identifier', (SELECT s.system_identifier FROM pg_control_system() s)::text, false);
    END IF;
    -- The timeline: a standby's last restartpoint's, a primary's that of
    -- its WAL insert position (a simple expression: no query to run).
    IF sysid IS NOT NULL AND standby THEN
      opts := opts || format(' with_xid=true xid_source=%s/%s', sysid, (SELECT c.timeline_id FROM pg_control_checkpoint() c));
    ELSIF sysid IS NOT NULL THEN
      opts := opts || format(' with_xid=true xid_source=%s/%s', sysid,
        ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint);
    END IF;
  END IF;
  -- The sidecar's deadline is what remains of statement_timeout (read
  -- with current_setting, not pg_settings: that view builds a row for
  -- every setting, which cost each call 0.4 ms), or the sidecar's own
  -- default of 30 s without one: dblink cannot be interrupted on
  -- PostgreSQL 15, so the sidecar must end every call.
  deadline := statement_timestamp() + coalesce(nullif(current_setting('statement_timeout')::interval, '0'), '30s');
  -- A wait for min_lsn is asked for in slices of 250 ms, so that a cancel
  -- (pg_cancel_backend, a client's) is seen between two of them.
  waits := opts <> '' AND opts ~ '(^|\s)min_lsn=';
  -- Hex digits need no quoting: the query goes into the statement as
  -- they are, which spares format('%L') a pass over every character
  -- (the E'' string reads the same whatever standard_conforming_strings
  -- says; the sidecar's strings are standard-conforming).
  query_hex := encode(query, 'hex');
  LOOP
    slice_ms := ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000);
    IF slice_ms <= 0 THEN
      RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
    END IF;
    IF waits THEN
      slice_ms := least(slice_ms, 250);
    END IF;
    remote := format(E'SELECT array_agg(id), array_agg(distance), array_agg(xid) FROM knn(%L, \'\\x%s\'::bytea, %s, %L)',
      ix.name, query_hex, k,
      opts || format(' timeout=%sms', slice_ms));
    BEGIN
      IF NOT 'vecside' = ANY (coalesce(@dblink@.dblink_get_connections(), '{}')) THEN
        PERFORM @dblink@.dblink_connect('vecside', 'vecside_sidecar');
      END IF;
      CASE ix.key_type
      WHEN 'bigint'::regtype THEN
        SELECT t.ids, t.distances, t.xids INTO ids, distances, xids
        FROM @dblink@.dblink('vecside', remote) AS t(ids bigint[], distances double precision[], xids bigint[]);
      WHEN 'integer'::regtype THEN
        SELECT t.ids, t.distances, t.xids INTO ids, distances, xids
        FROM @dblink@.dblink('vecside', remote) AS t(ids integer[], distances double precision[], xids bigint[]);
      WHEN 'smallint'::regtype THEN
        SELECT t.ids, t.distances, t.xids INTO ids, distances, xids
        FROM @dblink@.dblink('vecside', remote) AS t(ids smallint[], distances double precision[], xids bigint[]);
      WHEN 'uuid'::regtype THEN
        SELECT t.ids, t.distances, t.xids INTO ids, distances, xids
        FROM @dblink@.dblink('vecside', remote) AS t(ids uuid[], distances double precision[], xids bigint[]);
      WHEN 'text'::regtype THEN
        SELECT t.ids, t.distances, t.xids INTO ids, distances, xids
        FROM @dblink@.dblink('vecside', remote) AS t(ids text[], distances double precision[], xids bigint[]);
      WHEN 'character varying'::regtype THEN
        SELECT t.ids, t.distances, t.xids INTO ids, distances, xids
        FROM @dblink@.dblink('vecside', remote) AS t(ids varchar[], distances double precision[], xids bigint[]);
      ELSE
        RAISE EXCEPTION 'vecside index % has % keys, which the sidecar does not serve', ix.name, ix.key_type
          USING ERRCODE = 'feature_not_supported';
      END CASE;
      RETURN;
    EXCEPTION
      WHEN connection_exception OR internal_error THEN
        -- The sidecar restarted, or the network broke: the named
        -- connection is dead (08006 the first time, XX000 after). Forget
        -- it, connect once more.
        IF reconnected THEN
          RAISE;
        END IF;
        reconnected := true;
        BEGIN
          PERFORM @dblink@.dblink_disconnect('vecside');
        EXCEPTION WHEN OTHERS THEN
          NULL;
        END;
      WHEN object_not_in_prerequisite_state THEN
        -- A slice of a wait for min_lsn ran out (the sidecar says how far
        -- it has applied): ask again, unless the deadline has passed.
        GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
        IF NOT waits OR detail NOT LIKE 'applied_lsn=%' OR clock_timestamp() >= deadline THEN
          RAISE;
        END IF;
    END;
  END LOOP;
END $fn$
$t$;
BEGIN
  query_bytes := CASE WHEN vec IS NULL THEN 'pg_catalog.array_send(query)' ELSE format('%1$I.vector_send(query::%1$I.vector)', vec) END;
  FOR ix IN SELECT * FROM vecside.indexes ORDER BY name LOOP
    i := i + 1;
    vars := vars || format(E'  found%1$s %2$s[];\n', i, ix.key_type);
    index_rows := index_rows || format(E'  %sIF index_name = %L THEN\n    ix := %L::vecside.indexes;\n',
      CASE WHEN i > 1 THEN 'ELS' ELSE '' END, ix.name, ix::text);
    q := 'query';
    IF ix.vector_type NOT IN ('real[]'::regtype, 'double precision[]'::regtype) THEN
      -- The query in the column's type, converted once, not for each row.
      q := format('q%s', i);
      vars := vars || format(E'  %s %s;\n', q, ix.vector_type);
    END IF;
    dist := vecside.distance_sql(ix, format('t.%I', ix.vector_column), q);
    -- The distance is computed once per row (OFFSET 0 keeps the subquery
    -- from being merged into the one that filters and sorts on it).
    -- With xids (the nearest candidate's tells: a store has them for all
    -- or none), a row whose xmin is the sidecar's xid keeps the sidecar's
    -- distance and its TOASTed vector is not read. xmin takes SELECT on
    -- the table, not only on its columns; past 1,000 candidates finding
    -- each row's xid (array_position) would cost more than the vectors.
    -- The query's bytes for the sidecar: from the query already in the
    -- column's type where that is pgvector's vector.
    widen := format($w$%5$s
    qb := %8$s;
    LOOP
      ca := vecside.candidate_arrays(index_name, qb, want, NULL::%2$s, options);
      IF ca.xids[1] IS NOT NULL AND cardinality(ca.ids) <= 1000 AND has_table_privilege(%3$L, 'SELECT') THEN%6$s
      ELSE%7$s
      END IF;
      EXIT WHEN coalesce(cardinality(found%1$s), 0) >= k OR coalesce(cardinality(ca.ids), 0) < want OR want >= 10000;
      want := least(want * 4, 10000);
    END LOOP;$w$, i, ix.key_type, ix.tbl::text, dist,
      CASE WHEN q <> 'query' THEN format(E'\n    %s := query::%s;', q, ix.vector_type) ELSE '' END,
      format(heap, i, ix.key_column, ix.tbl, format(
        'CASE WHEN t.xmin::text::bigint = ca.xids[array_position(ca.ids, t.%1$I)] THEN ca.distances[array_position(ca.ids, t.%1$I)] ELSE %2$s END',
        ix.key_column, dist)),
      format(heap, i, ix.key_column, ix.tbl, dist),
      CASE WHEN vec IS NULL OR q = 'query' THEN query_bytes
        WHEN ix.vector_type = format('%I.vector', vec)::regtype THEN format('%I.vector_send(%s)', vec, q)
        ELSE query_bytes END);
    key_branches := key_branches || format($b$
  IF index_name = %1$L THEN
    IF pg_typeof(key_type) <> %2$L::regtype THEN
      RAISE EXCEPTION 'vecside index %% gives %% keys, not %%', index_name, %2$L, pg_typeof(key_type)
        USING ERRCODE = 'datatype_mismatch', HINT = %3$L;
    END IF;%4$s
    FOR j IN 1..coalesce(cardinality(found%5$s), 0) LOOP
      id := found%5$s[j];
      distance := dists[j];
      RETURN NEXT;
    END LOOP;
    RETURN;
  END IF;$b$, ix.name, ix.key_type, format('pass NULL::%s', ix.key_type), widen, i);
    row_branches := row_branches || format($b$
  IF index_name = %1$L THEN
    IF pg_typeof(row_type) <> %2$L::regtype THEN
      RAISE EXCEPTION 'vecside index %% gives %% rows, not %%', index_name, %2$L, pg_typeof(row_type)
        USING ERRCODE = 'datatype_mismatch', HINT = %3$L;
    END IF;%4$s
    RETURN QUERY SELECT t, dists[array_position(found%5$s, t.%7$I)] AS d FROM %6$s t WHERE t.%7$I = ANY (found%5$s)
      ORDER BY d, t.%7$I;
    RETURN;
  END IF;$b$, ix.name, (SELECT c.reltype FROM pg_class c WHERE c.oid = ix.tbl)::regtype, format('pass NULL::%s', ix.tbl), widen,
      i, ix.tbl, ix.key_column);
  END LOOP;
  body := $c$
#variable_conflict use_variable
DECLARE
  want integer := k;
  qb bytea;
  ca record;
  dists double precision[];
%1$sBEGIN%2$s
  RAISE EXCEPTION 'vecside index "%%" does not exist', index_name USING ERRCODE = 'undefined_object',
    HINT = 'the indexes are listed in vecside.indexes; vecside sql install registers those the sidecar has';
END$c$;
  -- search returns the k rows of the index's table nearest to query, as
  -- (key, exact distance), nearest first: what
  --   SELECT key, <distance> FROM table ORDER BY <distance> LIMIT k
  -- returns for the caller, with the sidecar choosing which rows to look
  -- at. key_type is a NULL of the key column's type (NULL::bigint).
  EXECUTE format($f$
CREATE OR REPLACE FUNCTION vecside.search(index_name text, query real[], k integer, key_type anyelement,
  options text DEFAULT '')
RETURNS TABLE (id anyelement, distance double precision)
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $fn$%s$fn$
$f$, format(body, vars, key_branches));
  -- search_rows is search returning the table's rows: row_type is a NULL
  -- of the table's row type (NULL::items). It reads the k rows a second
  -- time, with the distances of the first: STABLE, its statements see
  -- the calling statement's snapshot, so both read the same versions.
  EXECUTE format($f$
CREATE OR REPLACE FUNCTION vecside.search_rows(index_name text, query real[], k integer, row_type anyelement,
  options text DEFAULT '')
RETURNS TABLE (item anyelement, distance double precision)
LANGUAGE plpgsql STABLE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $fn$%s$fn$
$f$, format(body, vars, row_branches));
  -- candidate_arrays: a branch per index with its row, else no such index.
  IF i > 0 THEN
    index_rows := index_rows || E'  ELSE\n  ' || no_index || E'\n  END IF;';
  ELSE
    index_rows := no_index;
  END IF;
  EXECUTE replace(replace(arrays_fn, '@dblink@', quote_ident(dbl)), '@index@', index_rows);
  ALTER FUNCTION vecside.candidate_arrays(text, bytea, integer, anyelement, text) OWNER TO vecside_owner;
  -- candidates is candidate_arrays as a set of rows, for a real[] query:
  -- STABLE (it writes nothing), every name qualified and no SET, so that
  -- the planner inlines it into the calling query.
  EXECUTE format($f$
CREATE OR REPLACE FUNCTION vecside.candidates(index_name text, query real[], k integer, key_type anyelement,
  options text DEFAULT '')
RETURNS TABLE (id anyelement, distance double precision, xid bigint)
LANGUAGE sql STABLE SECURITY INVOKER AS $fn$
  SELECT u.id, u.distance, u.xid FROM vecside.candidate_arrays(index_name, %s, k, key_type, options) a,
    ROWS FROM (pg_catalog.unnest(a.ids), pg_catalog.unnest(a.distances), pg_catalog.unnest(a.xids)) AS u(id, distance, xid)
$fn$
$f$, query_bytes);
  REVOKE ALL ON FUNCTION vecside.search(text, real[], integer, anyelement, text),
    vecside.search_rows(text, real[], integer, anyelement, text),
    vecside.candidate_arrays(text, bytea, integer, anyelement, text),
    vecside.candidates(text, real[], integer, anyelement, text) FROM PUBLIC;
  GRANT EXECUTE ON FUNCTION vecside.search(text, real[], integer, anyelement, text),
    vecside.search_rows(text, real[], integer, anyelement, text),
    vecside.candidate_arrays(text, bytea, integer, anyelement, text),
    vecside.candidates(text, real[], integer, anyelement, text) TO vecside_user;
END $$;

CREATE OR REPLACE FUNCTION vecside.indexes_changed()
RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM vecside.write_searches();
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER write_searches AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON vecside.indexes
  FOR EACH STATEMENT EXECUTE FUNCTION vecside.indexes_changed();
SELECT vecside.write_searches();

REVOKE ALL ON FUNCTION vecside.register_index(text, regclass, name, name, text, boolean, boolean),
  vecside.set_sidecar(text, integer, text, text, text, text),
  vecside.distance_sql(vecside.indexes, text, text),
  vecside.write_searches(), vecside.indexes_changed(),
  vecside.l2_distance(real[], real[]), vecside.cosine_distance(real[], real[]),
  vecside.negative_inner_product(real[], real[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vecside.l2_distance(real[], real[]), vecside.cosine_distance(real[], real[]),
  vecside.negative_inner_product(real[], real[]) TO vecside_user;

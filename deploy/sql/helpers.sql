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
--     and row-level security.

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
-- still returns only rows they can.
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
REVOKE ALL ON vecside.indexes FROM PUBLIC;
GRANT SELECT ON vecside.indexes TO vecside_owner, vecside_user;

-- register_index records an index of the sidecar; the column types are
-- read from the catalog.
CREATE OR REPLACE FUNCTION vecside.register_index(index_name text, tbl regclass, key_column name,
  vector_column name, metric text, allow_rls boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE kt regtype; vt regtype;
BEGIN
  SELECT a.atttypid INTO kt FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = key_column AND NOT a.attisdropped;
  SELECT a.atttypid INTO vt FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = vector_column AND NOT a.attisdropped;
  IF kt IS NULL OR vt IS NULL THEN
    RAISE EXCEPTION 'table % has no column %', tbl, CASE WHEN kt IS NULL THEN key_column ELSE vector_column END
      USING ERRCODE = 'undefined_column';
  END IF;
  IF vt::text NOT IN ('real[]', 'double precision[]') AND pg_catalog.format_type(vt, NULL) !~ '(^|\.)vector$' THEN
    RAISE EXCEPTION 'column %.% is %, not vector, real[] or double precision[]', tbl, vector_column, vt
      USING ERRCODE = 'datatype_mismatch';
  END IF;
  INSERT INTO vecside.indexes VALUES (index_name, tbl, key_column, kt, vector_column, vt, metric, allow_rls)
  ON CONFLICT (name) DO UPDATE SET tbl = EXCLUDED.tbl, key_column = EXCLUDED.key_column, key_type = EXCLUDED.key_type,
    vector_column = EXCLUDED.vector_column, vector_type = EXCLUDED.vector_type, metric = EXCLUDED.metric,
    allow_rls = EXCLUDED.allow_rls;
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

-- index_info is the registered index, or an error; given, if not NULL,
-- must be its key type (the type of its table's rows if as_rows).
CREATE OR REPLACE FUNCTION vecside.index_info(index_name text, given regtype DEFAULT NULL, as_rows boolean DEFAULT false)
RETURNS vecside.indexes LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ix vecside.indexes;
  want regtype;
BEGIN
  SELECT * INTO ix FROM vecside.indexes i WHERE i.name = index_name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'vecside index "%" does not exist', index_name USING ERRCODE = 'undefined_object',
      HINT = 'the indexes are listed in vecside.indexes; vecside sql install registers those the sidecar has';
  END IF;
  want := CASE WHEN as_rows THEN (SELECT c.reltype FROM pg_class c WHERE c.oid = ix.tbl)::regtype ELSE ix.key_type END;
  IF given <> want THEN
    RAISE EXCEPTION 'vecside index % gives % %, not %', ix.name, want, CASE WHEN as_rows THEN 'rows' ELSE 'keys' END, given
      USING ERRCODE = 'datatype_mismatch', HINT = format('pass NULL::%s', want);
  END IF;
  RETURN ix;
END $$;

-- candidates asks the sidecar for the k nearest keys of query in an
-- index, with their approximate distances. It runs as vecside_owner and
-- does nothing else: one named dblink connection per backend, made again
-- once if the sidecar restarted; the statement's remaining
-- statement_timeout is the sidecar's timeout; every value sent is quoted
-- with format('%L'). On a hot standby the sidecar is asked to have applied
-- what the standby replayed first (min_lsn), unless the caller says.
CREATE OR REPLACE FUNCTION vecside.candidates(index_name text, query real[], k integer, key_type anyelement,
  options text DEFAULT '')
RETURNS TABLE (id anyelement, distance double precision)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ix vecside.indexes := vecside.index_info(index_name, pg_typeof(key_type));
  who name := session_user;
  dbl name := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink');
  timeout_ms bigint := (SELECT s.setting::bigint FROM pg_settings s WHERE s.name = 'statement_timeout');
  opts text := coalesce(options, '');
  remote text;
  conns text[];
  ids text[];
  dists double precision[];
BEGIN
  IF index_name IS NULL OR query IS NULL OR k IS NULL THEN
    RAISE EXCEPTION 'vecside.candidates: the index, query and k must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT (has_column_privilege(who, ix.tbl, ix.key_column, 'SELECT')
          AND has_column_privilege(who, ix.tbl, ix.vector_column, 'SELECT')) THEN
    RAISE EXCEPTION 'permission denied for table %', ix.tbl USING ERRCODE = 'insufficient_privilege',
      DETAIL = format('vecside index %s needs SELECT on %s(%s, %s)', ix.name, ix.tbl, ix.key_column, ix.vector_column);
  END IF;
  IF NOT ix.allow_rls AND EXISTS (
      SELECT FROM pg_class c JOIN pg_roles r ON r.rolname = who
      WHERE c.oid = ix.tbl AND c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
        AND (c.relforcerowsecurity OR NOT pg_has_role(who, c.relowner, 'USAGE'))) THEN
    RAISE EXCEPTION 'row-level security applies to % on %, and vecside index % is not opted in', who, ix.tbl, ix.name
      USING ERRCODE = 'insufficient_privilege',
      HINT = 'candidates would show keys and distances of rows the role cannot read; a DBA may allow it: UPDATE vecside.indexes SET allow_rls = true WHERE name = ...';
  END IF;
  IF opts ~ '(^|\s)timeout=' THEN
    RAISE EXCEPTION 'the sidecar''s timeout is what remains of statement_timeout' USING ERRCODE = 'invalid_parameter_value',
      HINT = 'SET statement_timeout instead of passing timeout=';
  END IF;
  IF pg_is_in_recovery() AND opts !~ '(^|\s)min_lsn=' THEN
    -- On a hot standby: wait (within the timeout) until the sidecar, which
    -- follows the primary, has applied what this standby has replayed, so
    -- that no row the standby sees is missing from the candidates.
    opts := opts || format(' min_lsn=%s', pg_last_wal_replay_lsn());
  END IF;
  IF timeout_ms > 0 THEN
    timeout_ms := timeout_ms - (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::bigint;
    IF timeout_ms <= 0 THEN
      RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
    END IF;
    opts := opts || format(' timeout=%sms', timeout_ms);
  END IF;
  remote := format('SELECT id, distance FROM knn(%L, %L, %s, %L)', ix.name, query::text, k, opts);
  FOR attempt IN 1..2 LOOP
    BEGIN
      EXECUTE format('SELECT %I.dblink_get_connections()', dbl) INTO conns;
      IF conns IS NULL OR NOT 'vecside' = ANY (conns) THEN
        EXECUTE format('SELECT %I.dblink_connect(%L, %L)', dbl, 'vecside', 'vecside_sidecar');
      END IF;
      EXECUTE format('SELECT array_agg(t.id::text ORDER BY t.distance, t.id), array_agg(t.distance ORDER BY t.distance, t.id)
                      FROM %I.dblink(%L, %L) AS t(id %s, distance double precision)', dbl, 'vecside', remote, ix.key_type)
        INTO ids, dists;
      EXIT;
    EXCEPTION WHEN connection_exception OR internal_error THEN
      -- The sidecar restarted, or the network broke: the named connection
      -- is dead (08006 the first time, XX000 after). Forget it, connect
      -- once more.
      IF attempt = 2 THEN
        RAISE;
      END IF;
      BEGIN
        EXECUTE format('SELECT %I.dblink_disconnect(%L)', dbl, 'vecside');
      EXCEPTION WHEN OTHERS THEN
        NULL;
      END;
    END;
  END LOOP;
  RETURN QUERY EXECUTE format('SELECT u.i::%s, u.d FROM unnest($1::text[], $2::double precision[]) AS u(i, d)', ix.key_type)
    USING ids, dists;
END $$;

-- distance_sql is the SQL of the exact distance between the vector
-- expression vec and the query expression query (a real[]), as the
-- index's metric defines it: pgvector's operators for a vector column,
-- the functions of distance.sql for real[] and double precision[].
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

-- rerank_sql is the query vecside.search runs: the candidates, then the
-- table's rows among them with exact distances, nearest first, under the
-- caller's privileges and row-level security. $1 index, $2 query, $3
-- candidates to ask for, $4 options, $5 k. It returns the number of
-- candidates, and the keys (as text) and distances of the rows.
CREATE OR REPLACE FUNCTION vecside.rerank_sql(ix vecside.indexes)
RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT format($q$
    WITH c AS MATERIALIZED (SELECT c.id FROM vecside.candidates($1, $2, $3, NULL::%1$s, $4) c),
         r AS (SELECT t.%2$I AS id, %3$s AS d FROM %4$s t
               WHERE t.%2$I IN (SELECT id FROM c) AND %3$s IS NOT NULL
               ORDER BY d, t.%2$I LIMIT $5)
    SELECT (SELECT count(*) FROM c)::integer, array_agg(r.id::text ORDER BY r.d, r.id), array_agg(r.d ORDER BY r.d, r.id) FROM r
  $q$, ix.key_type, ix.key_column, vecside.distance_sql(ix, format('t.%I', ix.vector_column), '$2'), ix.tbl)
$$;

-- search_keys finds the keys of the k rows nearest to query that the
-- caller can see: rows it cannot see are left out, and more candidates
-- asked for (up to 10,000) until k rows are found or there are no more.
CREATE OR REPLACE FUNCTION vecside.search_keys(ix vecside.indexes, query real[], k integer, options text,
  OUT ids text[], OUT dists double precision[])
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  sql text := vecside.rerank_sql(ix);
  want integer := k;
  ncand integer;
BEGIN
  LOOP
    EXECUTE sql INTO ncand, ids, dists USING ix.name, query, want, options, k;
    EXIT WHEN coalesce(cardinality(ids), 0) >= k OR ncand < want OR want >= 10000;
    want := least(want * 4, 10000);
  END LOOP;
END $$;

-- search returns the k rows of the index's table nearest to query, as
-- (key, exact distance), nearest first: what
--   SELECT key, <distance> FROM table ORDER BY <distance> LIMIT k
-- returns for the caller, with the sidecar choosing which rows to look
-- at. key_type is a NULL of the key column's type (NULL::bigint).
--   SELECT i.*, s.distance FROM vecside.search('items_embedding', $1, 10, NULL::bigint) s
--   JOIN items i ON i.id = s.id ORDER BY s.distance;
CREATE OR REPLACE FUNCTION vecside.search(index_name text, query real[], k integer, key_type anyelement,
  options text DEFAULT '')
RETURNS TABLE (id anyelement, distance double precision)
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ix vecside.indexes := vecside.index_info(index_name, pg_typeof(key_type));
  found record;
BEGIN
  found := vecside.search_keys(ix, query, k, options);
  RETURN QUERY EXECUTE format('SELECT u.i::%s, u.d FROM unnest($1::text[], $2::double precision[]) AS u(i, d)', ix.key_type)
    USING found.ids, found.dists;
END $$;

-- search_rows is search returning the table's rows: row_type is a NULL
-- of the table's row type (NULL::items).
--   SELECT (r.item).*, r.distance FROM vecside.search_rows('items_embedding', $1, 10, NULL::items) r;
CREATE OR REPLACE FUNCTION vecside.search_rows(index_name text, query real[], k integer, row_type anyelement,
  options text DEFAULT '')
RETURNS TABLE (item anyelement, distance double precision)
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ix vecside.indexes := vecside.index_info(index_name, pg_typeof(row_type), true);
  found record;
  dist text := vecside.distance_sql(ix, format('t.%I', ix.vector_column), '$2');
BEGIN
  found := vecside.search_keys(ix, query, k, options);
  RETURN QUERY EXECUTE format('SELECT t, %1$s AS d FROM %2$s t WHERE t.%3$I = ANY ($1::%4$s[]) AND %1$s IS NOT NULL
    ORDER BY d, t.%3$I LIMIT $3', dist, ix.tbl, ix.key_column, ix.key_type) USING found.ids, query, k;
END $$;

REVOKE ALL ON FUNCTION vecside.register_index(text, regclass, name, name, text, boolean),
  vecside.set_sidecar(text, integer, text, text, text, text), vecside.index_info(text, regtype, boolean),
  vecside.candidates(text, real[], integer, anyelement, text), vecside.distance_sql(vecside.indexes, text, text),
  vecside.rerank_sql(vecside.indexes), vecside.search_keys(vecside.indexes, real[], integer, text),
  vecside.search(text, real[], integer, anyelement, text), vecside.search_rows(text, real[], integer, anyelement, text),
  vecside.l2_distance(real[], real[]), vecside.cosine_distance(real[], real[]),
  vecside.negative_inner_product(real[], real[]) FROM PUBLIC;
ALTER FUNCTION vecside.candidates(text, real[], integer, anyelement, text) OWNER TO vecside_owner;
GRANT EXECUTE ON FUNCTION vecside.index_info(text, regtype, boolean) TO vecside_owner, vecside_user;
GRANT EXECUTE ON FUNCTION vecside.candidates(text, real[], integer, anyelement, text),
  vecside.distance_sql(vecside.indexes, text, text), vecside.rerank_sql(vecside.indexes),
  vecside.search_keys(vecside.indexes, real[], integer, text),
  vecside.search(text, real[], integer, anyelement, text), vecside.search_rows(text, real[], integer, anyelement, text),
  vecside.l2_distance(real[], real[]), vecside.cosine_distance(real[], real[]),
  vecside.negative_inner_product(real[], real[]) TO vecside_user;

-- The per-pod publications of deploy/kubernetes/vecside.yaml, for a DBA
-- to run as a superuser in the indexed database before the StatefulSet
-- starts, and again with the new count before scaling it up:
--
--   psql "$SUPERUSER_DSN" -v replicas=2 -f deploy/kubernetes/publications.sql
--
-- Each pod follows the database through its own slot and publication,
-- named after it (pod vecside-0: vecside_0). The sidecar's role creates
-- neither table nor publication: only a table's owner may add it to a
-- publication, so the pods, logging in as a role that only reads the
-- table, would fail with 42501. This creates each missing publication as
-- vecside would, listing the key and vector columns of the ConfigMap's
-- --index, marks it as vecside's ('vecside sidecar', which vecside
-- teardown and the pods check) and gives it to the role, which can then
-- drop it with "vecside teardown --name vecside-N" after scaling down.
-- The role itself, with REPLICATION and its password, is the README's
-- "Point it at your database", step 2.
GRANT SELECT ON public.items TO vecside;
SELECT format('CREATE PUBLICATION %I FOR TABLE public.items (id, embedding) WITH (publish_via_partition_root = true)', pub),
       format('COMMENT ON PUBLICATION %I IS %L', pub, 'vecside sidecar'),
       format('ALTER PUBLICATION %I OWNER TO vecside', pub)
FROM generate_series(0, :replicas - 1) n, LATERAL (SELECT 'vecside_' || n AS pub) p
WHERE NOT EXISTS (SELECT FROM pg_publication WHERE pubname = pub)
\gexec

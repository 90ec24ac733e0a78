-- Removes what helpers.sql and distance.sql created in this database:
-- schema vecside with its functions and vecside.indexes, the foreign
-- server and user mapping, and the roles' privileges. The roles are
-- dropped too unless another database still uses them. dblink stays
-- installed, with EXECUTE still revoked from PUBLIC: other users of it
-- need a GRANT (or DROP EXTENSION dblink, if nothing else uses it).
DROP SCHEMA IF EXISTS vecside CASCADE;
DROP SERVER IF EXISTS vecside_sidecar CASCADE;
DO $$
DECLARE r name;
BEGIN
  FOREACH r IN ARRAY ARRAY['vecside_owner', 'vecside_user'] LOOP
    IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
      EXECUTE format('DROP OWNED BY %I', r);
      BEGIN
        EXECUTE format('DROP ROLE %I', r);
      EXCEPTION WHEN dependent_objects_still_exist THEN
        RAISE NOTICE 'role % is still used in another database: drop it from there', r;
      END;
    END IF;
  END LOOP;
END $$;

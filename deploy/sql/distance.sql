-- Exact distances over real[] with pgvector's semantics, accumulated in
-- double precision. Arrays of different lengths have no distance (NULL).
-- Each is computed as the sidecar computes its exact distances (kernels'
-- ExactDistance: the same operations in the same order; a square is a
-- product, as pow(d, 2) may round differently), so that where
-- vecside.search takes a distance from the sidecar (its fast path) it is
-- the one SQL would compute, to the last bit.
CREATE SCHEMA IF NOT EXISTS vecside;

CREATE OR REPLACE FUNCTION vecside.l2_distance(a real[], b real[])
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE WHEN cardinality(a) = cardinality(b) THEN
    (SELECT sqrt(sum((x::float8 - y::float8) * (x::float8 - y::float8))) FROM unnest(a, b) AS t(x, y))
  END
$$;

CREATE OR REPLACE FUNCTION vecside.cosine_distance(a real[], b real[])
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE WHEN cardinality(a) = cardinality(b) THEN
    (SELECT 1 - sum(x::float8 * y) / nullif(sqrt(sum(x::float8 * x) * sum(y::float8 * y)), 0)
     FROM unnest(a, b) AS t(x, y))
  END
$$;

CREATE OR REPLACE FUNCTION vecside.negative_inner_product(a real[], b real[])
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE WHEN cardinality(a) = cardinality(b) THEN
    (SELECT -sum(x::float8 * y) FROM unnest(a, b) AS t(x, y))
  END
$$;

-- Exact distances over real[] with pgvector's semantics, accumulated in
-- double precision. Arrays of different lengths have no distance (NULL).
CREATE SCHEMA IF NOT EXISTS vecside;

CREATE OR REPLACE FUNCTION vecside.l2_distance(a real[], b real[])
RETURNS double precision LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE WHEN cardinality(a) = cardinality(b) THEN
    (SELECT sqrt(sum((x::float8 - y::float8) ^ 2)) FROM unnest(a, b) AS t(x, y))
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

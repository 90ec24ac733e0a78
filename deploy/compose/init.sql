-- Run once by the postgres image when its data directory is new: the
-- role vecside logs in as, and a table for it to index.
--
-- REPLICATION lets the role create the slot and stream; owning the table
-- lets it add the table to its publication; CREATE on the database lets
-- it create the publication. SELECT alone is enough on tables someone
-- else owns, if a superuser creates the publication for the role (the
-- README's "Point it at your database"; vecside check prints the SQL).
CREATE ROLE vecside LOGIN REPLICATION PASSWORD 'vecside';
CREATE DATABASE app OWNER vecside;
\connect app
SET ROLE vecside;
CREATE TABLE items (
    id bigint PRIMARY KEY,
    embedding real[] NOT NULL
);
INSERT INTO items
SELECT g, ARRAY(SELECT random()::real FROM generate_series(1, 64) WHERE g > 0)
FROM generate_series(1, 10000) g;

// Package pgtest starts a throwaway PostgreSQL cluster for tests: a fresh
// data directory, a free TCP port on 127.0.0.1, a Unix socket in a short
// directory, wal_level=logical with room for many slots and senders, and
// fsync off. Nothing about the machine's own Postgres is used or changed.
//
// initdb refuses to run as root, so when the test process is root the
// server binaries run as the postgres user and the directory is handed to
// it. One cluster serves a whole test binary (see Main); each test takes
// its own database from it (NewDatabase), so publications and slots of
// different tests never meet.
//
// The binaries are looked up in $PG_BINDIR, then in the Debian location of
// PostgreSQL 15; a missing installation fails with a message that says
// what to install.
package pgtest

// Package pgcluster starts a throwaway PostgreSQL cluster: a fresh data
// directory under /tmp, a free TCP port on 127.0.0.1, a Unix socket in a
// short directory, wal_level=logical with room for many slots and
// senders, and fsync off. Nothing about the machine's own Postgres is
// used or changed, and Stop removes every file.
//
// initdb refuses to run as root, so when the process is root the server
// binaries run as the postgres user and the directory is handed to it.
//
// The binaries are looked up in $PG_BINDIR, then in the Debian location of
// PostgreSQL 15; a missing installation fails with a message that says
// what to install.
//
// The demo and the bench start their database here; tests start theirs
// through internal/pgtest, which adds a cluster per test binary and a
// database per test on top. This package does not import testing, so
// that the vecside binary, whose demo command uses it, does not link it.
package pgcluster

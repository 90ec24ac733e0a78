// Command vecside runs the vector-search sidecar and its tools.
//
//	vecside serve     follow a database and answer knn requests over pgwire
//	vecside status    a running sidecar's indexes: state, rows, lag, memory, errors
//	vecside search    ask a running sidecar (and optionally the heap) for the nearest rows
//	vecside check     pre-flight checks of a database, each failure with its fix
//	vecside teardown  drop the sidecar's slot and publication
//	vecside passwd    a users file line with a SCRAM-SHA-256 verifier, for serve --users
//	vecside sql       install, uninstall or print the SQL helpers (dblink) in a database
//	vecside demo      a throwaway Postgres, a clustered data set, recall and live updates
//	vecside cpu       CPU features and the kernel implementations chosen
//
// Postgres is always named by --source: a libpq connection string or URL.
// Passwords come from the string, PGPASSWORD or a passfile, never from a
// flag of their own. Every flag of serve has an environment variable named
// in its help text, and a key in the YAML file --config names (config.go):
// the file gives way to the environment, which gives way to the command
// line. serve reports the progress of its first copy as bars on a
// terminal and as log lines elsewhere (progress.go).
//
// The binary is the server's, so it links only what serving and the
// tools beside it need. The bench is a command of its own
// (cmd/vecside-bench), with its plots (gonum/plot) and load generators;
// the demo stays here, since it needs only the throwaway-Postgres
// launcher (internal/pgcluster), which does not import testing, unlike
// the test helper over it (internal/pgtest). A test (TestLeanBinary)
// keeps it so.
package main

// Command vecside-bench measures index kinds end to end on a data set of
// yours, against pgvector: recall, candidates, latency, QPS, build time,
// memory and replication lag, through each way in (the knn call, the Go
// client, the SQL helpers, the proxy). docs/bench.md is its manual (data,
// database, pgvector, the report), bench.go's help text the flags, and
// docs/benchmarks holds its results on our machine.
//
// It is a command of its own, not a subcommand of vecside, so that the
// server binary links none of what only measuring needs: the plots and
// their fonts (gonum/plot, through internal/benchreport), the load
// generators (internal/loadgen, internal/writeload), the cgroup and CPU
// placement of the throwaway Postgres. Both commands start a throwaway
// PostgreSQL through internal/pgcluster. Sidecars run in this process, as
// vecside serve assembles them (cmd/vecside/sidecar), or with --process as
// child vecside serve processes, whose memory is then their own: the
// vecside command beside this one, else on PATH, else named by --vecside.
package main

// Package benchreport holds what `vecside-bench` measured and writes it
// out three ways: JSON for programs (a header describing the machine, the
// data set and every index's build, then one object per measured point),
// a Markdown table for people, and an SVG plot of recall against queries
// per second made with gonum.org/v1/plot.
//
// A point is one system (vecside or pgvector), one index, one setting of
// its search knobs, one mode and one concurrency. The mode says what a
// query's latency covers: "sidecar-only" is the knn call alone, over
// pgwire; the others are what an application sees, each by its own way
// in: "end-to-end" is candidates plus the heap fetch and exact re-rank
// through heapfetch for vecside, the SQL query for pgvector;
// "sql-search" and "sql-search-rows" are vecside's SQL helpers
// (vecside.search, vecside.search_rows) called inside Postgres; "proxy"
// is pgvector's own statement sent through vecside proxy.
//
// The plot draws, per system, index and way in, the points that no other point of
// that index beats on both recall and throughput (the Pareto frontier, as
// ann-benchmarks does), end to end, in one panel per concurrency: the
// other points are dominated by a setting of the same index and would
// only hide the lines.
//
// The package measures nothing itself; the bench fills in the figures.
package benchreport

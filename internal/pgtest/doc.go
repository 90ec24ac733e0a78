// Package pgtest gives tests a throwaway PostgreSQL: one cluster of
// internal/pgcluster serves a whole test binary (see Main), and each test
// takes its own database from it (NewDatabase), so publications and slots
// of different tests never meet. A test that needs a cluster of its own
// (to restart or partition it) starts one with Start, and a hot standby
// of one with NewStandby.
//
// The launcher itself lives in pgcluster, which the demo and the bench
// use too; this package is its testing.TB-shaped side, and the only one
// of the two that imports testing.
package pgtest

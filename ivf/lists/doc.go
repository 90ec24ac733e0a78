// Package lists is the inverted-file engine that the ivf kind and the
// coded flat kind are built on: a fixed set of centroids, one store.List of
// 1-bit RaBitQ codes per centroid, and per row id the row's location, its
// second-pass data (a 4- or 8-bit extended code with its factors, and
// with store=float the float32 vector too) and its key. The ivf kind has many
// centroids and chooses the lists (Probe); the coded flat kind has one,
// the mean.
//
// # Search
//
// A search rotates the query once, scans the lists a Probe picks, nearest
// first, for as long as its More says, gives every row that survives the
// fast scan a second, precise estimate (with store=float, from the
// 4-bit code, then exactly for the rows whose bound can still beat the
// k-th: see floatExBits), and returns the smallest set of
// candidates that can still hold the true k nearest (store.Searcher),
// capped. A filter (store.Allow) skips blocks without an allowed row, and
// below DirectFraction of the rows estimates the allowed rows one by one.
// Writers keep each list's spread around its centroid (Radius, Reach),
// which ivf's probing reads.
//
// # Writes
//
// Rows are encoded outside the writers' mutex (Prepare), against the
// centroid nearest to them, so a copy's readers encode in parallel; the
// mutex covers only the insertion (Insert). Rows, ids, epochs and
// copy-on-write blocks follow indexer/store's rules, so searches take no
// lock. Clear swaps in a new generation of rows; an Allow made by a
// Coded remembers the generation whose ids it holds.
//
// # Checkpoint body
//
// Snapshot writes the rows of the moment it was taken (the codec's state,
// the centroids, the zero vectors, then every row's key, list and codes)
// while writers go on; LoadCoded reads it back and refuses a body of
// another dimension, metric or store.
//
// # Why apart from indexer/store
//
// indexer/store holds what every kind stores: rows, their ids, codes, and
// the rules that let searches read while writers change them. Lists,
// their centroids and probing are the engine of one family of kinds, and
// the ivf and flat types embed a *Coded, so the package's name says which
// engine they embed. It does not train centroids (store.KMeans, called by
// ivf), retrain, or rebuild: a structural change is a new Coded built
// from the table.
package lists

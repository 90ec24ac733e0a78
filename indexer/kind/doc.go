// Package kind is the registry of index kinds: the contract an index kind
// fulfils (Index) and the one descriptor (Kind) each registers, from
// which the indexer derives everything it knows about kinds: the names
// kind= takes, the build options each accepts and their validation, the
// store a kind keeps by default, the per-query settings (probes=,
// ef_search=) that SET, SHOW and knn's options accept, how many rows it
// trains on, how it is made and loaded, what a benchmark sweeps, and
// which setting the indexer tunes to meet a recall target (Tuning, see
// indexer/calibrate).
//
// Every index reports its rows and the bytes it holds (Stats); what else
// a kind has to show about its indexes (a graph's unrepaired deletes, an
// inverted file's list sizes) are figures (Figure) declared in its
// descriptor, each with its name, help text and type, from which the
// sidecar's metrics, vecside_status()'s figures column and the bench's
// reports show every kind's own numbers without naming any.
//
// A kind lives in a package of its own (flat, ivf, hnsw) that imports
// this one and calls Register from its init. Nothing here imports a kind,
// and the indexer imports each built-in kind for that side effect only
// (indexer/kinds.go), so a new kind is one new package plus one import
// line there. A kind outside the build (a test's) registers itself the
// same way before it is used; indexer/kindtest holds the conformance
// suite every registered kind must pass.
//
// What a kind does beside the contract is said by optional interfaces,
// asked for by type assertion: Admitter (its Insert may do a backlog's
// work, which a rebuild's copy waits for before the apply lock),
// StreamFollower (told when the stream's lag starts to count on it),
// Excluder (a search can leave a row out of its walk, not only out of
// its answer) and Closer (background work to stop once the index is
// dropped).
//
// The package deliberately holds no state beyond the registry, which is
// filled during init and read-only after it: Register is not meant to be
// called once searches run.
package kind

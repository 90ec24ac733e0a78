// Package calibrate measures the recall an index's searches reach on the
// index's own table, so that an index serves a recall target rather than
// a fixed beam width or probe count: the same ef_search gave recall@10
// 0.998 on Fashion-MNIST, 0.88 on 100-d word vectors and 0.78 on 1,536-d
// embeddings.
//
// # Queries whose answers are known
//
// A Set holds an index's calibration queries with their exact nearest
// rows, kept current with every change the index takes, so that no
// calibration ever has to read the table again:
//
//   - Bases rows of the sample the index trains on before its copy
//     become queries; each is also moved off its row by each of a few
//     offsets (in multiples of its distance to its nearest sample row),
//     so that Queries vectors are known before the copy starts;
//   - every row the copy and then the stream add is compared with every
//     query (a few microseconds, done beside the row's encoding, outside
//     the apply lock), and kept in a query's list if it is among its
//     nearest 2·K; deletes, renames and truncates are followed;
//   - each list knows how far it is exact: every row outside it is at
//     least its bound away (the nearest row ever left out), so the rows
//     nearer than the bound are the table's nearest even after deletes
//     took some of them. A query whose exact prefix falls below K is
//     dropped from calibrations; the next rebuild makes new ones.
//
// A query taken from a row is held out: its own row (recognised by the
// vector's hash as the copy meets it) is left out of its list and of its
// answers, and its searches ask for one row more.
//
// # What is measured
//
// Measure runs every query through the index at increasing values of
// the kind's tuning setting (kind.Tuning: ef_search for hnsw, probes for
// ivf), each a fifth more than the last, until every kind of query
// reaches recall 0.998 or the setting stops making a difference, and
// keeps how many of its K nearest rows each query found at each value:
// recall after the client's exact re-rank, since a true neighbour among
// the candidates is always ranked in.
//
// Which queries' recall counts depends on the queries the index gets. A
// search for a row of the table, or a near-duplicate of one, is easy for
// a graph: it walks to the row and reads its neighbours off its links. A
// search for a new item, as far from the rows as they are from each
// other, is the hardest. Held-out queries of clustered sets measured
// recall@10 0.85 where the rows themselves measured 0.95 at the same
// ef_search; moved queries at about the rows' spacing matched the
// held-out ones within 0.02. So a Curve keeps each query's offset from
// its base row, in multiples of that row's distance to its nearest row
// in the table (known once the copy is done), and Offsets keeps the
// offsets of the index's latest searches (the distance to their nearest
// candidate over the table's spacing). Curve.For reads the recall, per
// base, off the query whose offset is nearest the searches' median;
// before any search, queries are taken to be new items (NewItem).
//
// The inner product has no spacing to measure: its queries' offsets stay
// the multiples of the sample's spacing they were made with.
//
// # When
//
// The indexer measures an index when its copy ends, before it serves,
// and again in the background whenever a tenth of its rows (at least a
// thousand) changed since; the Set and its last Curve go into every
// checkpoint. An index filled by the stream from an empty table takes
// its first Bases rows as queries, held out, with no moved ones (it
// cannot know the spacing of rows it has not seen).
package calibrate

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
//     become queries, and each is also moved off its row by one of a few
//     small offsets in turn (multiples of its distance to its nearest
//     sample row), so that all Queries vectors are known before the copy
//     starts;
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
// A base row is recognised, as the copy meets it, by its vector's hash.
//
// # Three kinds of search
//
// Which searches' recall counts depends on the searches the index gets.
// A search for a stored item, or a near-duplicate of one, is easy for a
// graph: it walks to the row and reads its neighbours off its links. A
// search for a new item is the hardest. So each base row is searched for
// in three ways:
//
//   - held out, as a new item: the search treats the row as absent (a
//     graph neither returns it nor walks through it, see kind.Excluder)
//     and should find its K nearest other rows;
//   - as itself, a stored item, which it should find first;
//   - moved off by its offset, a near-duplicate.
//
// Each search has an offset: how far its query lies off the nearest row
// in multiples of the rows' spacing there (the distance from the base
// row to its nearest other row, known once the copy is done): 1 held
// out, 0 as itself, the move's length over the spacing when moved. The
// index keeps the offsets of its latest searches too (Offsets: the
// distance to each one's nearest candidate over the table's median
// spacing), and Curve.For reads the recall, per base, off the search
// whose offset is nearest their median; before any search, searches are
// taken to be for new items (NewItem).
//
// Moving a row off by noise does not make a new item: on text-like sets,
// rows moved by their spacing were harder than held-out draws and
// underestimated their recall@10 by 0.05, while held-out rows of the
// table matched held-out draws.
//
// The inner product has no spacing to measure: its moved queries'
// offsets stay the multiples of the sample's spacing they were made with.
//
// # What is measured, and what searches get
//
// Measure runs every search at increasing values of the kind's tuning
// setting (kind.Tuning: ef_search for hnsw, probes for ivf), each a
// fifth more than the last, until every kind of search reaches recall
// 0.998 or the setting stops making a difference, and keeps how many of
// its K rows each found at each value: recall after the client's exact
// re-rank, since a true neighbour among the candidates is always ranked
// in. For a target, searches take the first value whose mean recall,
// less two and a half standard errors over the bases (one is about
// 0.005), reaches it, mixed with the value before in the proportion that
// just does (Point): the steps of a small setting are coarse (an
// inverted file's probes 2 and 3 can give 0.93 and 0.99), and the
// mixture meets the target without paying for the higher one on every
// search. Which value a search gets follows from a hash of its vector
// (Point.PickFor): the same query always gets the same setting, and the
// same answer from the same index. The mean alone would miss the target
// every other time; one standard error still let HNSW miss it in three
// builds of six on two sets, whose searches ran up to 0.011 below the
// calibration's estimate (see sureBy).
//
// # When
//
// The indexer measures an index when its copy ends, before it serves,
// and again in the background whenever a tenth of its rows (at least a
// thousand) changed since; the Set and its last Curve go into every
// checkpoint. An index filled by the stream from an empty table takes
// its first Bases rows as queries, with no moved ones (it cannot know
// the spacing of rows it has not seen).
package calibrate

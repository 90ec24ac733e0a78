// Package knnlimits holds the bounds of a knn request that the sidecar
// enforces (indexer, rpc) and its clients must stay within (heapfetch,
// the proxy): how many candidates one request may ask for, how many keys
// its allow-set may hold, and how long a message may be. A client that
// plans within them (splitting an allow-set, capping its widening) never
// meets the error the server would answer with.
//
// It imports nothing, so that heapfetch, a client library, shares the
// server's numbers without linking the server.
package knnlimits

// MaxCandidates bounds k × oversample: every candidate costs the client a
// heap fetch, and thousands of them mean the wrong index or settings.
const MaxCandidates = 10000

// MaxAllowKeys bounds knn's allow-set. 65,536 bigint keys take 768 KiB in
// the binary array format, within MaxMessageLen beside a vector of 16,000
// dimensions; wider keys (uuid, text) reach the message cap first. A
// larger set is refused with 54000: split it over several calls and
// merge, or filter the rows after the search.
const MaxAllowKeys = 1 << 16

// MaxMessageLen bounds a message body: a 16,000-d vector as text, at up
// to 24 characters an element, fits with room to spare.
const MaxMessageLen = 1 << 20

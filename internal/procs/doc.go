// Package procs sizes the sidecar's CPU-bound work to the cores it may
// use, and gives Go's scheduler a spare processor (P) while background
// work fills the others.
//
// Go's scheduler looks for goroutines whose network I/O is ready only
// when a P runs out of other work, or from its monitor thread once no one
// has looked for 10 ms. A sidecar that links streamed rows into an HNSW
// graph keeps every P busy: the linkers, the searches and the stream's
// apply each run for hundreds of microseconds and hand their P over with
// runtime.Gosched, which puts them back in the global queue, so that a P
// seldom finds no work. A search request that arrived, the client's read
// of its answer and the next message of the replication stream then wait
// for that poll.
//
// So the searches that run at once and the rows being linked, in all of
// the process's indexes together (Slot), are bounded by Cores, and while
// linkers run (Hold) a serving process runs
// Cores+1 Ps (Serve): CPU-bound work leaves a P idle, whose thread waits
// in the network poller, and the kernel, which wakes that thread the
// moment a socket is ready, shares the cores among the threads. The spare
// P is dropped a second after the last linker ends: with nothing filling
// the Ps, it only adds a thread that spins for work on the same cores,
// and a client searching alone does fewer queries a second with it
// (docs/benchmarks/procs.md, "The spare P without linkers").
//
// Under the stream, while linkers run, the spare P shortens both the
// latency of searches the machine has room for and the replication lag
// (BenchmarkLagUnderSearch/hnsw; docs/benchmarks/procs.md, "The spare P
// under the stream"). Clients that search without pause keep every P
// busy either way, and see no change.
//
// The bound on linking is the process's, not an index's: while an index
// is rebuilt beside the one serving (and while several indexes take
// rows), each index's linkers would otherwise fill the cores on their
// own, and the spare P with them.
package procs

package rpc

import (
	"log/slog"
	"sync"
	"time"
)

// faultKind names something a client did wrong, or a limit that turned it
// away: the label of vecside_rpc_faults_total.
type faultKind string

const (
	faultProtocol        faultKind = "protocol_violation"
	faultStartup         faultKind = "bad_startup"
	faultAuthTimeout     faultKind = "auth_timeout"
	faultAuthFailed      faultKind = "auth_failed"
	faultBadCancel       faultKind = "bad_cancel_key"
	faultCancelDropped   faultKind = "cancel_dropped"
	faultTooManyStartups faultKind = "too_many_startups"
	faultStartupEvicted  faultKind = "startup_evicted"
	faultTooManySessions faultKind = "too_many_connections"
	faultIdle            faultKind = "idle_timeout"
	faultStalled         faultKind = "reply_not_read"
	faultLimit           faultKind = "limit_exceeded"
	faultAccept          faultKind = "accept_error"
)

// faultLogInterval is how often each kind of fault may be logged: a
// client that repeats one cannot fill the log.
const faultLogInterval = 10 * time.Second

// faults counts client faults and logs a sample of them: the first of a
// kind, then at most one per faultLogInterval, saying how many went
// unlogged since.
type faults struct {
	log *slog.Logger

	mu     sync.Mutex
	counts map[faultKind]uint64
	last   map[faultKind]time.Time
	quiet  map[faultKind]uint64 // counted but not logged since the last line
}

func newFaults(log *slog.Logger) *faults {
	return &faults{log: log, counts: map[faultKind]uint64{}, last: map[faultKind]time.Time{}, quiet: map[faultKind]uint64{}}
}

// add counts one fault, and logs it with attrs unless a line for the same
// kind was written less than faultLogInterval ago.
func (f *faults) add(kind faultKind, msg string, attrs ...any) {
	f.mu.Lock()
	f.counts[kind]++
	now := time.Now()
	if last, ok := f.last[kind]; ok && now.Sub(last) < faultLogInterval {
		f.quiet[kind]++
		f.mu.Unlock()
		return
	}
	f.last[kind] = now
	unlogged := f.quiet[kind]
	f.quiet[kind] = 0
	f.mu.Unlock()
	attrs = append(attrs, "fault", string(kind))
	if unlogged > 0 {
		attrs = append(attrs, "unlogged_since_last", unlogged)
	}
	f.log.Warn(msg, attrs...)
}

// snapshot returns the counts so far.
func (f *faults) snapshot() map[faultKind]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[faultKind]uint64, len(f.counts))
	for k, n := range f.counts {
		out[k] = n
	}
	return out
}

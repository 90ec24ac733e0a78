package pgstartup

import (
	"net"
	"sync"
	"time"
)

// Admission holds the connections in startup and authentication of one
// listener, at most max of them. A new connection is not turned away while
// another holds a slot without using it: it takes the slot of the
// connection that has waited longest at the earliest stage (silent, then
// stopped after an SSLRequest), and is refused (53300) only when every
// slot is authenticating, until one of them finishes or reaches
// the server's authentication timeout. One address may hold at most
// perPeer connections that have not sent their startup
// message: past that, its newest takes the slot of its own oldest, so a
// flood from one address, however fast it reconnects, only ever evicts
// itself. A client that logs in sends its startup message within a round
// trip of connecting, and once authenticating is never evicted.
type Admission struct {
	max, perPeer int

	mu      sync.Mutex
	pending map[*Startup]struct{}
	waiting map[string]int // connections not yet authenticating, by peer
}

// Startup is one connection's hold on a slot.
type Startup struct {
	Conn  net.Conn
	adm   *Admission
	peer  string
	stage Stage
	since time.Time // when it reached its stage
}

// Stage is how far a connection has come through startup.
type Stage uint8

const (
	Connected      Stage = iota // nothing whole read yet
	Negotiated                  // an SSLRequest or GSSENCRequest answered
	Authenticating              // the StartupMessage read
)

// NewAdmission returns an Admission of max slots, perPeer of them at
// most for connections of one address that have not sent their
// StartupMessage.
func NewAdmission(max, perPeer int) *Admission {
	return &Admission{max: max, perPeer: perPeer, pending: map[*Startup]struct{}{}, waiting: map[string]int{}}
}

// Admit takes a slot for nc, evicting another connection if needed; the
// caller closes the evicted one. It returns a nil Startup if every slot
// is authenticating.
func (a *Admission) Admit(nc net.Conn) (st *Startup, evicted *Startup) {
	peer := peerOf(nc.RemoteAddr())
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting[peer] >= a.perPeer {
		evicted = a.victim(peer)
	}
	if evicted == nil && len(a.pending) >= a.max {
		if evicted = a.victim(""); evicted == nil {
			return nil, nil
		}
	}
	if evicted != nil {
		a.removeLocked(evicted)
	}
	st = &Startup{Conn: nc, adm: a, peer: peer, since: time.Now()}
	a.pending[st] = struct{}{}
	a.waiting[peer]++
	return st, evicted
}

// victim is the connection to evict for a newcomer: among peer's (all if
// peer is empty), the one longest at the earliest stage short of
// authenticating; nil if all are authenticating.
func (a *Admission) victim(peer string) *Startup {
	var v *Startup
	for st := range a.pending {
		if peer != "" && st.peer != peer || st.stage == Authenticating {
			continue
		}
		if v == nil || st.stage < v.stage || st.stage == v.stage && st.since.Before(v.since) {
			v = st
		}
	}
	return v
}

// Stage is how far st had come when it was last advanced.
func (st *Startup) Stage() Stage {
	st.adm.mu.Lock()
	defer st.adm.mu.Unlock()
	return st.stage
}

// Advance records that st reached stage.
func (st *Startup) Advance(stage Stage) {
	a := st.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[st]; !ok {
		return // evicted
	}
	if stage == Authenticating && st.stage != Authenticating {
		a.unwait(st.peer)
	}
	st.stage, st.since = stage, time.Now()
}

// Release gives st's slot back, unless it was evicted.
func (st *Startup) Release() {
	a := st.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[st]; ok {
		a.removeLocked(st)
	}
}

func (a *Admission) removeLocked(st *Startup) {
	delete(a.pending, st)
	if st.stage != Authenticating {
		a.unwait(st.peer)
	}
}

func (a *Admission) unwait(peer string) {
	if a.waiting[peer]--; a.waiting[peer] == 0 {
		delete(a.waiting, peer)
	}
}

// peerOf is the address a connection comes from, without its port: the
// unit of the per-peer limit.
func peerOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return addr.String()
}

package rpc

import (
	"net"
	"sync"
	"time"
)

// admission holds the connections in startup and authentication of one
// listener, at most Limits.MaxStartups of them. A new connection is not turned away while
// another holds a slot without using it: it takes the slot of the
// connection that has waited longest at the earliest stage (silent, then
// stopped after an SSLRequest), and is refused (53300) only when every
// slot is authenticating, until one of them finishes or reaches
// Limits.AuthTimeout. One address may hold at most
// Limits.MaxStartupsPerPeer connections that have not sent their startup
// message: past that, its newest takes the slot of its own oldest, so a
// flood from one address, however fast it reconnects, only ever evicts
// itself. A client that logs in sends its startup message within a round
// trip of connecting, and once authenticating is never evicted.
type admission struct {
	max, perPeer int

	mu      sync.Mutex
	pending map[*startup]struct{}
	waiting map[string]int // connections not yet authenticating, by peer
}

// startup is one connection's hold on a slot.
type startup struct {
	adm   *admission
	nc    net.Conn
	peer  string
	stage startStage
	since time.Time // when it reached its stage
}

// startStage is how far a connection has come through startup.
type startStage uint8

const (
	stageConnected      startStage = iota // nothing whole read yet
	stageNegotiated                       // an SSLRequest or GSSENCRequest answered
	stageAuthenticating                   // the StartupMessage read
)

func newAdmission(max, perPeer int) *admission {
	return &admission{max: max, perPeer: perPeer, pending: map[*startup]struct{}{}, waiting: map[string]int{}}
}

// admit takes a slot for nc, evicting another connection if needed; the
// caller closes the evicted one. It returns a nil startup if every slot
// is authenticating.
func (a *admission) admit(nc net.Conn) (st *startup, evicted *startup) {
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
	st = &startup{adm: a, nc: nc, peer: peer, since: time.Now()}
	a.pending[st] = struct{}{}
	a.waiting[peer]++
	return st, evicted
}

// victim is the connection to evict for a newcomer: among peer's (all if
// peer is empty), the one longest at the earliest stage short of
// authenticating; nil if all are authenticating.
func (a *admission) victim(peer string) *startup {
	var v *startup
	for st := range a.pending {
		if peer != "" && st.peer != peer || st.stage == stageAuthenticating {
			continue
		}
		if v == nil || st.stage < v.stage || st.stage == v.stage && st.since.Before(v.since) {
			v = st
		}
	}
	return v
}

// advance records that st reached stage.
func (st *startup) advance(stage startStage) {
	a := st.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[st]; !ok {
		return // evicted
	}
	if stage == stageAuthenticating && st.stage != stageAuthenticating {
		a.unwait(st.peer)
	}
	st.stage, st.since = stage, time.Now()
}

// release gives st's slot back, unless it was evicted.
func (st *startup) release() {
	a := st.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[st]; ok {
		a.removeLocked(st)
	}
}

func (a *admission) removeLocked(st *startup) {
	delete(a.pending, st)
	if st.stage != stageAuthenticating {
		a.unwait(st.peer)
	}
}

func (a *admission) unwait(peer string) {
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

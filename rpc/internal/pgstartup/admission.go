package pgstartup

import (
	"errors"
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
//
// Authentication itself holds a server's backend where the server
// authenticates (the proxy relays it to PostgreSQL), so one address may
// also authenticate at most authPerPeer connections at a time: the
// others wait their turn (Authenticate), evictable as connections that
// have not begun, so that clients that never finish (a StartupMessage,
// then silence to the password request) hold authPerPeer backends and
// slots, not all of them, and another address's logins go on.
type Admission struct {
	max, perPeer, authPerPeer int

	mu      sync.Mutex
	pending map[*Startup]struct{}
	waiting map[string]int       // connections not yet authenticating, by peer
	turns   map[string]*peerTurn // authentication turns, by peer
}

// peerTurn is one address's authentication turns: a token in ch for each
// connection authenticating, users the connections holding or awaiting
// one.
type peerTurn struct {
	ch    chan struct{}
	users int
}

// ErrEvicted is Authenticate's error for a connection whose slot went to
// another while it waited for its turn.
var ErrEvicted = errors.New("pgstartup: the connection's startup slot went to a newer one")

// ErrTurnTimeout is Authenticate's error past its deadline.
var ErrTurnTimeout = errors.New("pgstartup: too many connections of this address authenticating")

// Startup is one connection's hold on a slot.
type Startup struct {
	Conn  net.Conn
	adm   *Admission
	peer  string
	stage Stage
	since time.Time     // when it reached its stage
	gone  chan struct{} // closed when evicted
	turn  *peerTurn     // held while authenticating
}

// Stage is how far a connection has come through startup.
type Stage uint8

const (
	Connected      Stage = iota // nothing whole read yet
	Negotiated                  // an SSLRequest or GSSENCRequest answered
	Queued                      // the StartupMessage read, waiting for its turn to authenticate
	Authenticating              // authenticating
)

// NewAdmission returns an Admission of max slots, perPeer of them at
// most for connections of one address that have not begun to
// authenticate, of which authPerPeer (0: any number) may authenticate at
// a time.
func NewAdmission(max, perPeer, authPerPeer int) *Admission {
	return &Admission{max: max, perPeer: perPeer, authPerPeer: authPerPeer,
		pending: map[*Startup]struct{}{}, waiting: map[string]int{}, turns: map[string]*peerTurn{}}
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
		close(evicted.gone)
	}
	st = &Startup{Conn: nc, adm: a, peer: peer, since: time.Now(), gone: make(chan struct{})}
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
	a.advanceLocked(st, stage)
}

func (a *Admission) advanceLocked(st *Startup, stage Stage) {
	if stage == Authenticating && st.stage != Authenticating {
		a.unwait(st.peer)
	}
	st.stage, st.since = stage, time.Now()
}

// Authenticate advances st to Authenticating once its address has
// fewer than authPerPeer connections authenticating; until then st
// waits, Queued, and gives up with ErrEvicted if its slot goes to a newer
// connection or ErrTurnTimeout at deadline.
func (st *Startup) Authenticate(deadline time.Time) error {
	a := st.adm
	a.mu.Lock()
	if _, ok := a.pending[st]; !ok {
		a.mu.Unlock()
		return ErrEvicted
	}
	if a.authPerPeer <= 0 {
		a.advanceLocked(st, Authenticating)
		a.mu.Unlock()
		return nil
	}
	a.advanceLocked(st, Queued)
	t := a.turns[st.peer]
	if t == nil {
		t = &peerTurn{ch: make(chan struct{}, a.authPerPeer)}
		a.turns[st.peer] = t
	}
	t.users++
	a.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var err error
	select {
	case t.ch <- struct{}{}:
	case <-st.gone:
		err = ErrEvicted
	case <-timer.C:
		err = ErrTurnTimeout
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[st]; !ok && err == nil {
		<-t.ch // evicted as its turn came
		err = ErrEvicted
	}
	if err != nil {
		a.leaveLocked(st.peer, t)
		return err
	}
	st.turn = t
	a.advanceLocked(st, Authenticating)
	return nil
}

// Release gives st's slot back, unless it was evicted, and its turn to
// authenticate.
func (st *Startup) Release() {
	a := st.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[st]; ok {
		a.removeLocked(st)
	}
	if st.turn != nil {
		<-st.turn.ch
		a.leaveLocked(st.peer, st.turn)
		st.turn = nil
	}
}

func (a *Admission) leaveLocked(peer string, t *peerTurn) {
	if t.users--; t.users == 0 {
		delete(a.turns, peer)
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

package pgstartup

import (
	"errors"
	"net"
	"testing"
	"time"
)

// peerConn is a connection from ip.
type peerConn struct {
	net.Conn
	ip string
}

func (c peerConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.ParseIP(c.ip), Port: 5432} }

func admit(t *testing.T, a *Admission, ip string) *Startup {
	t.Helper()
	st, evicted := a.Admit(peerConn{ip: ip})
	if st == nil || evicted != nil {
		t.Fatalf("admitting a connection of %s: %v, evicted %v", ip, st, evicted)
	}
	return st
}

// TestAuthenticateTurns: one address authenticates at most authPerPeer
// connections at a time; the next waits until one is released, or gives
// up at its deadline, while another address's go ahead.
func TestAuthenticateTurns(t *testing.T) {
	a := NewAdmission(16, 8, 2)
	soon := time.Now().Add(5 * time.Second)
	first, second := admit(t, a, "10.0.0.1"), admit(t, a, "10.0.0.1")
	for _, st := range []*Startup{first, second} {
		if err := st.Authenticate(soon); err != nil {
			t.Fatal(err)
		}
	}
	if err := admit(t, a, "10.0.0.2").Authenticate(soon); err != nil {
		t.Errorf("another address, beside two authenticating: %v", err)
	}
	third := admit(t, a, "10.0.0.1")
	if err := third.Authenticate(time.Now().Add(50 * time.Millisecond)); !errors.Is(err, ErrTurnTimeout) {
		t.Errorf("a third of one address: %v, want ErrTurnTimeout", err)
	}
	if third.Stage() != Queued {
		t.Errorf("after its wait: stage %d, want Queued", third.Stage())
	}
	done := make(chan error)
	fourth := admit(t, a, "10.0.0.1")
	go func() { done <- fourth.Authenticate(soon) }()
	select {
	case err := <-done:
		t.Fatalf("a fourth authenticated beside two: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	first.Release()
	if err := <-done; err != nil || fourth.Stage() != Authenticating {
		t.Errorf("after one was released: %v, stage %d", err, fourth.Stage())
	}
}

// TestEvictedWhileQueued: a connection waiting for its turn gives its
// slot to newer ones of its address, as one that has not begun does, and
// its wait ends at once; authenticating ones are never evicted.
func TestEvictedWhileQueued(t *testing.T) {
	a := NewAdmission(16, 1, 1)
	soon := time.Now().Add(5 * time.Second)
	authenticating := admit(t, a, "10.0.0.1")
	if err := authenticating.Authenticate(soon); err != nil {
		t.Fatal(err)
	}
	queued := admit(t, a, "10.0.0.1")
	done := make(chan error)
	go func() { done <- queued.Authenticate(soon) }()
	for queued.Stage() != Queued {
		time.Sleep(time.Millisecond)
	}
	newer, evicted := a.Admit(peerConn{ip: "10.0.0.1"})
	if newer == nil || evicted != queued {
		t.Fatalf("a newer connection evicted %v, want the queued one", evicted)
	}
	if err := <-done; !errors.Is(err, ErrEvicted) {
		t.Errorf("the queued one's wait: %v, want ErrEvicted", err)
	}
	authenticating.Release()
	if err := newer.Authenticate(soon); err != nil {
		t.Errorf("after the authenticating one was released: %v", err)
	}
}

package pgstartup

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// scriptedListener hands out what its script says, one Accept each: a
// connection, or an error.
type scriptedListener struct {
	script chan any
	closed chan struct{}
}

func newScripted() *scriptedListener {
	return &scriptedListener{script: make(chan any, 16), closed: make(chan struct{})}
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	select {
	case next := <-l.script:
		if err, ok := next.(error); ok {
			return nil, err
		}
		return next.(net.Conn), nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *scriptedListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *scriptedListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestListenerServe: failing Accepts are retried with growing pauses, an
// admitted connection is served, and one that finds every slot
// authenticating is refused; Serve returns nil once ctx ends, after the
// connections it serves have ended, and an error when the listener is
// closed under it.
func TestListenerServe(t *testing.T) {
	ln := newScripted()
	var pauses []time.Duration
	var served, refused, evicted atomic.Int32
	release := make(chan struct{})
	l := &Listener{
		Admission: NewAdmission(1, 1, 0),
		ServeConn: func(ctx context.Context, st *Startup) {
			if err := st.Authenticate(time.Now().Add(time.Minute)); err != nil {
				t.Error(err)
			}
			served.Add(1)
			<-release
		},
		Evicted:      func(st *Startup) { evicted.Add(1) },
		Refused:      func(nc net.Conn) { refused.Add(1) },
		AcceptFailed: func(err error, pause time.Duration) { pauses = append(pauses, pause) },
	}
	emfile := &net.OpError{Op: "accept", Err: syscall.EMFILE}
	ln.script <- emfile
	ln.script <- emfile
	ln.script <- emfile
	ln.script <- peerConn{ip: "10.0.0.1"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, ln) }()
	waitFor := func(what string, n *atomic.Int32) {
		for deadline := time.Now().Add(5 * time.Second); n.Load() < 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no connection %s", what)
			}
		}
	}
	waitFor("served", &served)
	ln.script <- peerConn{ip: "10.0.0.2"} // the one slot is authenticating
	waitFor("refused", &refused)
	if served.Load() != 1 || evicted.Load() != 0 {
		t.Errorf("served %d, evicted %d; want 1 and 0", served.Load(), evicted.Load())
	}
	if len(pauses) != 3 || pauses[0] != 5*time.Millisecond || pauses[1] != 10*time.Millisecond || pauses[2] != 20*time.Millisecond {
		t.Errorf("pauses after failed accepts: %v, want 5ms 10ms 20ms", pauses)
	}
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) while a connection was served", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("Serve after ctx ended: %v", err)
	}

	// A listener closed by someone else is an error.
	ln = newScripted()
	ln.Close()
	if err := l.Serve(context.Background(), ln); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener: %v, want net.ErrClosed", err)
	}
}

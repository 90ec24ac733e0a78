package pgstartup

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Listener is what Serve needs of a server: how it serves a connection
// that Admission admitted, and what it says to those it turns away.
type Listener struct {
	Admission *Admission
	// ServeConn serves an admitted connection, in a goroutine of its own,
	// until it ends; ctx ends with Serve's.
	ServeConn func(ctx context.Context, st *Startup)
	// Evicted is told of a connection in startup whose slot went to a
	// newer one (Admission.Admit), Refused of a new connection that got
	// none: each must close it, and must not wait for the client.
	Evicted func(st *Startup)
	Refused func(nc net.Conn)
	// AcceptFailed is told when Accept fails and will be tried again
	// after pause.
	AcceptFailed func(err error, pause time.Duration)
}

// Serve accepts connections on ln until ctx ends or ln is closed, and
// returns once every connection it admitted has been served. A failing
// Accept (out of file descriptors: EMFILE, ENFILE) is retried after a
// pause that doubles from 5 ms to a second while it keeps failing: a
// server that runs out of descriptors serves again once connections
// end, and a loop of failures does not spin.
func (l *Listener) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.AcceptFailed(err, pause)
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		pause = 0
		st, evicted := l.Admission.Admit(nc)
		if evicted != nil {
			l.Evicted(evicted)
		}
		if st == nil {
			l.Refused(nc)
			continue
		}
		wg.Go(func() { l.ServeConn(ctx, st) })
	}
}

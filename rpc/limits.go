package rpc

import (
	"fmt"
	"time"
)

// Limits bound what clients can make the server hold: connections, time,
// buffered replies, prepared statements and the work of parsing. Every
// limit has a default (a zero field takes it) chosen so that a client,
// authenticated or not, cannot stop the server or take memory in
// proportion to what it sends; DefaultLimits lists them. A client that
// reaches a limit gets an error with the SQLSTATE named on its field.
type Limits struct {
	// MaxConnections bounds the authenticated sessions; past it a new
	// client is refused with FATAL 53300. ReservedConnections of them are
	// kept for Config.AdminUser: other users are refused once only that
	// many are free. A negative ReservedConnections reserves none.
	MaxConnections      int
	ReservedConnections int
	// MaxUserConnections bounds the sessions of any one user (0: no
	// bound of its own), so that one user cannot take every slot from
	// the others; past it a login is refused with FATAL 53300. The
	// admin user is not bound by it.
	MaxUserConnections int
	// MaxStartups bounds the connections still in startup or
	// authentication, which count on top of MaxConnections: at most
	// MaxConnections + MaxStartups client sockets are open at once.
	// MaxStartupsPerPeer of them from one address go first when a new
	// connection needs a slot (it is as large as a pool that reconnects
	// all at once after a restart should need): a connection that has sent nothing (or
	// stopped after an SSLRequest) gives its slot to a newer one, the
	// longest waiting first (see pgstartup.Admission). Only when every slot is
	// authenticating is a new connection refused with FATAL 53300, before
	// anything is read from it. Each has AuthTimeout to authenticate,
	// else it is closed (57014, "canceling authentication due to
	// timeout").
	MaxStartups        int
	MaxStartupsPerPeer int
	AuthTimeout        time.Duration
	// IdleTimeout ends a session that has waited this long for its client:
	// for the next message, or for it to read the replies already sent
	// (FATAL 57P05). Negative disables it.
	IdleTimeout time.Duration
	// MaxReplyBuffer bounds the reply bytes a session holds for its
	// client: past it they are written out, and the session reads nothing
	// more until the client has taken them (within IdleTimeout).
	MaxReplyBuffer int
	// MaxPrepared bounds the prepared statements and portals a session
	// holds, MaxPreparedBytes their total size (query text, bound
	// parameters, rows of a suspended portal); past either, Parse or Bind
	// fails with 54000.
	MaxPrepared      int
	MaxPreparedBytes int
	// MaxQueryStatements bounds the statements of one simple Query
	// (54000); empty statements are free.
	MaxQueryStatements int
}

// DefaultLimits are the limits a zero Limits field takes. With them, the
// memory clients can hold is about 4.5 MiB per session (a 1 MiB message,
// the reply buffer, prepared statements, one result of 10,000 rows) and
// about 20 KiB per connection in startup (5 MiB for all of them).
var DefaultLimits = Limits{
	MaxConnections:      100,
	ReservedConnections: 3,
	MaxStartups:         256,
	MaxStartupsPerPeer:  64,
	AuthTimeout:         10 * time.Second,
	IdleTimeout:         10 * time.Minute,
	MaxReplyBuffer:      256 << 10,
	MaxPrepared:         1000,
	MaxPreparedBytes:    2 << 20,
	MaxQueryStatements:  1000,
}

// withDefaults fills zero fields from DefaultLimits and checks the rest.
func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits
	fill := func(v *int, def int, name string) error {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			return fmt.Errorf("rpc: Limits.%s is %d; want a positive number, or 0 for %d", name, *v, def)
		}
		return nil
	}
	for _, f := range []struct {
		v    *int
		def  int
		name string
	}{
		{&l.MaxConnections, d.MaxConnections, "MaxConnections"},
		{&l.MaxStartups, d.MaxStartups, "MaxStartups"},
		{&l.MaxReplyBuffer, d.MaxReplyBuffer, "MaxReplyBuffer"},
		{&l.MaxPrepared, d.MaxPrepared, "MaxPrepared"},
		{&l.MaxPreparedBytes, d.MaxPreparedBytes, "MaxPreparedBytes"},
		{&l.MaxQueryStatements, d.MaxQueryStatements, "MaxQueryStatements"},
	} {
		if err := fill(f.v, f.def, f.name); err != nil {
			return l, err
		}
	}
	switch {
	case l.ReservedConnections == 0:
		l.ReservedConnections = min(d.ReservedConnections, l.MaxConnections-1)
	case l.ReservedConnections < 0:
		l.ReservedConnections = 0
	}
	if err := fill(&l.MaxStartupsPerPeer, min(d.MaxStartupsPerPeer, l.MaxStartups), "MaxStartupsPerPeer"); err != nil {
		return l, err
	}
	if l.MaxUserConnections < 0 {
		return l, fmt.Errorf("rpc: Limits.MaxUserConnections is %d; want a positive number, or 0 for no bound per user", l.MaxUserConnections)
	}
	if l.ReservedConnections >= l.MaxConnections {
		return l, fmt.Errorf("rpc: Limits.ReservedConnections is %d; want fewer than MaxConnections (%d)", l.ReservedConnections, l.MaxConnections)
	}
	if l.AuthTimeout == 0 {
		l.AuthTimeout = d.AuthTimeout
	}
	if l.AuthTimeout < 0 {
		return l, fmt.Errorf("rpc: Limits.AuthTimeout is %v; want a positive duration", l.AuthTimeout)
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	return l, nil
}

// deadline is when a wait of d from now ends: never if d is negative.
func deadline(d time.Duration) time.Time {
	if d < 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

//go:build cgo

package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/rpc/internal/pgstartup"
)

// errCancelled ends a connection that carried a CancelRequest.
var errCancelled = errors.New("cancel request")

// Authentication request codes that the client answers.
const (
	authCleartext    = 3
	authMD5          = 5
	authGSS          = 7
	authGSSContinue  = 8
	authSASL         = 10
	authSASLContinue = 11
)

// negotiate reads the client's packets up to its StartupMessage,
// answering its requests for encryption (TLS if Config.ClientTLS, GSS
// never) and relaying a CancelRequest (errCancelled); nc is the
// connection the session goes on over, and body the StartupMessage's.
func (p *Proxy) negotiate(st *pgstartup.Startup) (nc net.Conn, encrypted bool, body []byte, err error) {
	nc = st.Conn
	// As PostgreSQL, each encryption is negotiated at most once, and
	// none after TLS is on: a request again is an unknown protocol.
	sslAsked, gssAsked := false, false
	for {
		if body, err = pgstartup.ReadPacket(nc); err != nil {
			return nil, false, nil, err
		}
		code := binary.BigEndian.Uint32(body)
		switch {
		case code == sslRequestCode && !sslAsked:
			sslAsked = true
		case code == gssEncRequestCode && !gssAsked:
			gssAsked = true
		case code == sslRequestCode || code == gssEncRequestCode:
			refuse(nc, "0A000", fmt.Sprintf("unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", code>>16, code&0xffff))
			return nil, false, nil, errors.New("encryption requested twice")
		}
		if code == sslRequestCode && p.cfg.ClientTLS != nil {
			// Exactly one byte, then the handshake: ReadPacket read
			// nothing past the request.
			if _, err := nc.Write([]byte{'S'}); err != nil {
				return nil, false, nil, err
			}
			tc := tls.Server(nc, p.cfg.ClientTLS)
			if err := tc.Handshake(); err != nil {
				return nil, false, nil, fmt.Errorf("TLS handshake: %w", err)
			}
			nc, encrypted, gssAsked = tc, true, true
			st.Advance(pgstartup.Negotiated)
			continue
		}
		if code == sslRequestCode || code == gssEncRequestCode {
			if _, err := nc.Write([]byte{'N'}); err != nil {
				return nil, false, nil, err
			}
			st.Advance(pgstartup.Negotiated)
			continue
		}
		if code == cancelRequestCode && len(body) == 12 {
			nc.Close() // the client expects nothing back
			st.Release()
			p.cancel(binary.BigEndian.Uint32(body[4:]), binary.BigEndian.Uint32(body[8:]))
			return nil, false, nil, errCancelled
		}
		if code>>16 != 3 {
			refuse(nc, "0A000", fmt.Sprintf("unsupported frontend protocol %d.%d", code>>16, code&0xffff))
			return nil, false, nil, errors.New("unsupported protocol")
		}
		return nc, encrypted, body, nil
	}
}

// startup reads the client's startup packets, connects upstream, sends
// PostgreSQL the client's StartupMessage as it came, and relays the
// authentication exchange both ways until PostgreSQL is ready for
// queries: PostgreSQL decides who gets in, and the session upstream is
// the client's own role. SSL and GSS encryption are declined. The only
// message changed is BackendKeyData: the client gets the proxy's key,
// which a CancelRequest maps back to the upstream backend's. After the
// StartupMessage, the connection waits for its address's turn to
// authenticate (Limits.MaxAuthenticatingPerPeer), then takes a session
// slot, held when a session is returned (and given back otherwise).
func (p *Proxy) startup(st *pgstartup.Startup) (*session, error) {
	deadline := time.Now().Add(p.limits.AuthTimeout)
	st.Conn.SetDeadline(deadline)
	nc, encrypted, body, err := p.negotiate(st)
	if err != nil {
		return nil, err
	}
	if p.cfg.ClientTLSRequired && !encrypted {
		refuse(nc, "28000", "vecside proxy: connections without TLS are refused (sslmode=require or stronger)")
		return nil, errors.New("no TLS")
	}
	if err := st.Authenticate(deadline); err != nil {
		if errors.Is(err, pgstartup.ErrTurnTimeout) {
			p.stats.turnTimeouts.Add(1)
			refuse(nc, "53300", "sorry, too many clients already: too many connections from this address are authenticating")
		}
		return nil, err
	}
	select {
	case p.slots <- struct{}{}:
	default:
		refuse(nc, "53300", "sorry, too many clients already")
		return nil, errors.New("too many sessions")
	}
	up, target, err := p.dialUpstream(time.Until(deadline))
	if err != nil {
		<-p.slots
		refuse(nc, "08006", "vecside proxy: could not connect to the server: "+err.Error())
		return nil, err
	}
	up.SetDeadline(deadline)
	s := newSession(p, nc, up)
	s.upstream = target
	if _, err := up.Write(startupPacket(body)); err != nil {
		<-p.slots
		up.Close()
		return nil, err
	}
	if err := s.authenticate(st.Release); err != nil {
		up.Close()
		return s, err
	}
	nc.SetDeadline(time.Time{})
	up.SetDeadline(time.Time{})
	p.stats.sessions.Add(1)
	return s, nil
}

// authenticate relays until PostgreSQL's first ReadyForQuery, or its
// error. It calls authenticated before relaying that ReadyForQuery: a
// client that has seen it can connect again and find the startup slot
// free.
func (s *session) authenticate(authenticated func()) error {
	for {
		m, err := s.u.read()
		if err != nil {
			return err
		}
		switch m.typ {
		case 'R':
			if len(m.body) < 4 {
				return errors.New("short authentication message")
			}
			s.c.send(m)
			switch binary.BigEndian.Uint32(m.body) {
			case authCleartext, authMD5, authGSS, authGSSContinue, authSASL, authSASLContinue:
				if err := s.c.flush(); err != nil {
					return err
				}
				reply, err := s.c.read()
				if err != nil {
					return err
				}
				if reply.typ != 'p' {
					return fmt.Errorf("expected an authentication response, got message %q", reply.typ)
				}
				s.u.send(reply)
				if err := s.u.flush(); err != nil {
					return err
				}
			}
		case 'K':
			if len(m.body) < 8 {
				return errors.New("short BackendKeyData")
			}
			s.upPID, s.upSecret = binary.BigEndian.Uint32(m.body), binary.BigEndian.Uint32(m.body[4:])
			s.p.register(s)
			key := binary.BigEndian.AppendUint32(nil, s.pid)
			s.c.send(message{'K', binary.BigEndian.AppendUint32(key, s.secret)})
		case 'E':
			s.c.send(m)
			s.reported = true
			s.c.flush()
			return errors.New("refused by the server")
		case 'Z':
			if s.pid == 0 {
				return errors.New("the server sent no BackendKeyData")
			}
			authenticated()
			s.c.send(m)
			s.flow.status.Store(uint32(m.body[0]))
			return s.c.flush()
		case 'S':
			s.encoding.note(m.body)
			s.c.send(m)
		default:
			s.c.send(m)
		}
	}
}

// refuse sends a FATAL error to a client that gets no session.
func refuse(nc net.Conn, code, msg string) {
	b, _ := (&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg}).Encode(nil)
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	nc.Write(b)
	nc.Close()
}

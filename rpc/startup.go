package rpc

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/knnlimits"
	"github.com/vecside/vecside/rpc/internal/pgstartup"
)

// Startup request codes, in place of a protocol version.
const (
	cancelRequestCode = 80877102
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
)

// maxMessageLen bounds a message body (see knnlimits).
const maxMessageLen = knnlimits.MaxMessageLen

// startupMessage is the client's StartupMessage.
type startupMessage struct {
	minor  uint16 // protocol 3.minor
	params map[string]string
	order  []string // parameter names as sent
}

// readStartupPacket reads one startup packet (see pgstartup.ReadPacket);
// a length out of range is a protocol violation.
func readStartupPacket(r io.Reader) ([]byte, error) {
	body, err := pgstartup.ReadPacket(r)
	var le pgstartup.LengthError
	if errors.As(err, &le) {
		return nil, protocolViolation("%s", le.Error())
	}
	return body, err
}

// readStartup reads startup packets until the StartupMessage or a
// CancelRequest (encrypted or not), and records how far st has come. An
// SSLRequest is answered 'S' and the TLS handshake done before anything
// more is read, if the server has a certificate, else 'N'; GSSENCRequest
// is declined. Without TLS, a StartupMessage is refused if TLS is
// required.
func (s *Server) readStartup(ctx context.Context, c *conn, st *pgstartup.Startup) (*startupMessage, *pgproto3.CancelRequest, error) {
	var asked [2]bool // SSL, GSS
	for {
		body, err := readStartupPacket(c.nc)
		if err != nil {
			return nil, nil, err
		}
		code := binary.BigEndian.Uint32(body)
		switch {
		case code == sslRequestCode && len(body) == 4 && !asked[0] && !c.tls,
			code == gssEncRequestCode && len(body) == 4 && !asked[1] && !c.tls:
			asked[code-sslRequestCode] = true
			st.Advance(pgstartup.Negotiated)
			if code == sslRequestCode && s.tls != nil {
				if err := c.startTLS(ctx); err != nil {
					return nil, nil, err
				}
				continue
			}
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return nil, nil, err
			}
		case code == cancelRequestCode:
			var m pgproto3.CancelRequest
			if err := m.Decode(body); err != nil {
				return nil, nil, protocolViolation("invalid cancel request: %v", err)
			}
			return nil, &m, nil
		case code>>16 == 3:
			st.Advance(pgstartup.Authenticating)
			m, err := parseStartupMessage(body)
			if err == nil && s.cfg.TLSRequired && !c.tls {
				err = (&pgError{code: codeInvalidAuthorization, msg: "this server accepts only connections encrypted with TLS", fatal: true}).
					withHint("connect with sslmode=require, verify-ca or verify-full")
			}
			return m, nil, err
		default:
			e := errorf(codeFeatureNotSupported, "unsupported frontend protocol %d.%d: server supports 3.0", code>>16, code&0xffff)
			e.fatal = true
			return nil, nil, e
		}
	}
}

// startTLS answers an SSLRequest 'S' and runs the TLS handshake. Nothing
// was read past the request, so the handshake starts at the client's
// first TLS byte; from here on the connection reads and writes through
// TLS.
func (c *conn) startTLS(ctx context.Context) error {
	if _, err := c.nc.Write([]byte{'S'}); err != nil {
		return err
	}
	tc := tls.Server(c.nc, c.srv.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("rpc: TLS handshake: %w", err)
	}
	c.nc, c.out.nc, c.tls = tc, tc, true
	return nil
}

// channelBinding is the tls-server-end-point data of the connection:
// the hash of the server's certificate, or nil without TLS.
func (c *conn) channelBinding() []byte {
	if !c.tls {
		return nil
	}
	return c.srv.endpoint
}

func parseStartupMessage(body []byte) (*startupMessage, error) {
	m := &startupMessage{minor: uint16(binary.BigEndian.Uint32(body)), params: map[string]string{}}
	fields := strings.Split(string(body[4:]), "\x00")
	// key, value, key, value, ..., "", "" (the terminator and what follows it).
	if len(fields) < 2 || fields[len(fields)-1] != "" || fields[len(fields)-2] != "" || len(fields)%2 != 0 {
		return nil, protocolViolation("invalid startup packet layout: expected terminator as last byte")
	}
	for i := 0; i+1 < len(fields)-2; i += 2 {
		m.params[fields[i]] = fields[i+1]
		m.order = append(m.order, fields[i])
	}
	if m.params["user"] == "" {
		return nil, &pgError{code: codeInvalidAuthorization, msg: "no PostgreSQL user name specified in startup packet", fatal: true}
	}
	return m, nil
}

// handshake takes a new connection through startup and authentication,
// which must end within Limits.AuthTimeout. It returns the session, or
// the CancelRequest the connection sent, or why it is neither.
func (s *Server) handshake(ctx context.Context, st *pgstartup.Startup) (*conn, *pgproto3.CancelRequest, error) {
	nc := st.Conn
	until := time.Now().Add(s.limits.AuthTimeout)
	nc.SetDeadline(until)
	c := &conn{
		srv: s,
		ctx: ctx,
		nc:  nc,
		out: replies{nc: nc, limit: s.limits.MaxReplyBuffer, timeout: s.limits.IdleTimeout, until: until},
		tx:  txIdle,
		log: s.log,
	}
	m, cancel, err := s.readStartup(ctx, c, st)
	if m == nil || err != nil {
		if err != nil {
			c.handshakeFailed(err)
		}
		return nil, cancel, err
	}
	c.be = pgproto3.NewBackend(c.nc, c.nc)
	c.be.SetMaxBodyLen(maxMessageLen)
	c.sess = newSession(m.params["user"], indexer.DefaultSearchOptions())
	use := &usage{limits: &s.limits}
	c.statements, c.portals = newHeld[*prepared](use, "prepared statement"), newHeld[*portal](use, "portal")
	c.log = s.log.With("remote", nc.RemoteAddr().String(), "user", m.params["user"])
	if unrecognized := negotiable(m); m.minor > 0 || len(unrecognized) > 0 {
		c.out.send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unrecognized})
	}
	if err := c.applyStartupParams(m); err != nil {
		return nil, nil, c.handshakeFailed(err)
	}
	if err := s.auth.authenticate(c); err != nil {
		return nil, nil, c.handshakeFailed(err)
	}
	if err := s.register(c); err != nil {
		return nil, nil, c.handshakeFailed(err)
	}
	rand.Read(c.secret[:])
	c.sendStatus(c.sess.reported())
	c.out.send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret[:]})
	if err := c.ready(); err != nil {
		s.unregister(c)
		return nil, nil, err
	}
	c.out.until = time.Time{}
	nc.SetDeadline(time.Time{})
	return c, nil, nil
}

// handshakeFailed counts a failed startup and tells the client why, if
// the error is one to tell. It returns err.
func (c *conn) handshakeFailed(err error) error {
	var ne net.Error
	var pe *pgError
	remote := c.nc.RemoteAddr().String()
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		c.srv.faults.add(faultAuthTimeout, "connection closed: startup and authentication took too long", "remote", remote, "auth_timeout", c.srv.limits.AuthTimeout)
		pe = &pgError{code: codeQueryCanceled, msg: "canceling authentication due to timeout"}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
		return err // the client left: nobody to tell
	case errors.As(err, &pe):
		switch pe.code {
		case codeTooManyConnections: // counted by register
		case codeInvalidPassword:
			c.srv.faults.add(faultAuthFailed, "authentication failed", "remote", remote, "user", c.sess.user)
		default:
			c.srv.faults.add(faultStartup, "invalid startup", "remote", remote, "err", err)
		}
	default: // a message that does not decode, a failed TLS handshake
		c.srv.faults.add(faultStartup, "invalid startup", "remote", remote, "err", err)
		if c.be == nil {
			return err
		}
		pe = protocolViolation("invalid message during authentication: %v", err)
	}
	c.out.until = time.Time{}
	c.bye(pe)
	return err
}

// negotiable lists the protocol options (_pq_.*) the client asked for:
// vecside knows none of them.
func negotiable(m *startupMessage) []string {
	var out []string
	for _, k := range m.order {
		if strings.HasPrefix(k, "_pq_.") {
			out = append(out, k)
		}
	}
	return out
}

// applyStartupParams applies the settings sent in the StartupMessage, and
// those in its options parameter (-c name=value or --name=value, as
// PGOPTIONS and dblink send them). Parameters PostgreSQL has and vecside
// does not are ignored: they cannot change an answer.
func (c *conn) applyStartupParams(m *startupMessage) error {
	settings := [][2]string{}
	for _, k := range m.order {
		switch {
		case k == "user", k == "database", k == "replication", strings.HasPrefix(k, "_pq_."):
		case k == "options":
			opts, err := parseOptionsParam(m.params[k])
			if err != nil {
				return err
			}
			settings = append(settings, opts...)
		default:
			settings = append(settings, [2]string{k, m.params[k]})
		}
	}
	for _, kv := range settings {
		_, err := c.sess.set(kv[0], kv[1])
		var pe *pgError
		vecside := strings.HasPrefix(strings.ToLower(kv[0]), vecsidePrefix)
		if errors.As(err, &pe) && !vecside && (pe.code == codeUndefinedObject || pe.code == codeCantChangeRuntimeParam) {
			c.log.Debug("startup parameter ignored", "name", kv[0])
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseOptionsParam(s string) ([][2]string, error) {
	var out [][2]string
	fields := strings.Fields(s)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "-c" && i+1 < len(fields):
			i++
			f = fields[i]
		case strings.HasPrefix(f, "-c"):
			f = f[2:]
		case strings.HasPrefix(f, "--"):
			f = f[2:]
		default:
			return nil, errorf(codeInvalidParameterValue, "options %q: want -c name=value", s)
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, errorf(codeInvalidParameterValue, "options %q: want -c name=value", s)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

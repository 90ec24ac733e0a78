package rpc

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Authentication methods, as Config.Auth names them.
const (
	AuthSCRAM = "scram-sha-256"
	AuthTrust = "trust"
)

// authenticator runs the authentication exchange after the startup
// message, ending with AuthenticationOk. A mode that needs the client's
// answers (SCRAM-SHA-256) reads them from c.be, calling c.be.SetAuthType
// before each Receive.
type authenticator interface {
	authenticate(c *conn) error
}

func newAuthenticator(cfg Config) (authenticator, error) {
	switch cfg.Auth {
	case AuthTrust:
		return trust{}, nil
	case AuthSCRAM, "":
		if cfg.Users == nil {
			return nil, errNoUsers
		}
		s := &scramAuth{secret: cfg.MockAuthSecret}
		if len(s.secret) == 0 {
			s.secret = make([]byte, 32)
			rand.Read(s.secret)
		}
		s.users.Store(cfg.Users)
		return s, nil
	}
	return nil, fmt.Errorf(`rpc: Config.Auth %q is not supported: use %q (the default) or %q`, cfg.Auth, AuthSCRAM, AuthTrust)
}

// trust accepts every client.
type trust struct{}

func (trust) authenticate(c *conn) error {
	c.out.send(&pgproto3.AuthenticationOk{})
	return nil
}

// scramAuth asks for SCRAM-SHA-256, and offers SCRAM-SHA-256-PLUS on a
// TLS connection whose certificate it can bind to.
type scramAuth struct {
	users  atomic.Pointer[Users] // replaced by SetUsers
	secret []byte                // for the mock exchange of unknown users
}

// maxAuthMessage bounds a SASL message, as PG_MAX_AUTH_TOKEN_LENGTH does.
const maxAuthMessage = 65535

func (a *scramAuth) authenticate(c *conn) error {
	user := c.sess.user
	x := &scramServer{cbData: c.channelBinding()}
	users := a.users.Load()
	var ok bool
	if x.v, ok = users.lookup(user); !ok {
		x.v, x.doomed = mockVerifier(a.secret, user, users.mockIterations), true
	}
	mechanisms := []string{scramMechanism}
	if x.cbData != nil {
		mechanisms = []string{scramPlusMechanism, scramMechanism}
	}
	c.be.SetMaxBodyLen(maxAuthMessage)
	defer c.be.SetMaxBodyLen(maxMessageLen)

	c.out.send(&pgproto3.AuthenticationSASL{AuthMechanisms: mechanisms})
	init, err := receiveAuth[*pgproto3.SASLInitialResponse](c, pgproto3.AuthTypeSASL)
	if err != nil {
		return err
	}
	if init.AuthMechanism != scramMechanism && init.AuthMechanism != scramPlusMechanism {
		return protocolViolation("client selected an invalid SASL authentication mechanism")
	}
	first, err := x.start(init.AuthMechanism, init.Data)
	if err != nil {
		return err
	}
	c.out.send(&pgproto3.AuthenticationSASLContinue{Data: []byte(first)})
	resp, err := receiveAuth[*pgproto3.SASLResponse](c, pgproto3.AuthTypeSASLContinue)
	if err != nil {
		return err
	}
	final, err := x.finish(resp.Data, user)
	if err != nil {
		return err
	}
	c.out.send(&pgproto3.AuthenticationSASLFinal{Data: []byte(final)})
	c.out.send(&pgproto3.AuthenticationOk{})
	return nil
}

// SetUsers replaces the users SCRAM-SHA-256 checks logins against, as a
// reload of the users file does; sessions already open stay. It fails if
// the server does not ask for passwords.
func (s *Server) SetUsers(u *Users) error {
	a, ok := s.auth.(*scramAuth)
	if !ok || u == nil {
		return errors.New("rpc: SetUsers: the server does not use scram-sha-256, or no users were given")
	}
	a.users.Store(u)
	return nil
}

// receiveAuth flushes what the exchange sent and reads the client's
// answer, which must be an M.
func receiveAuth[M pgproto3.FrontendMessage](c *conn, authType uint32) (M, error) {
	var zero M
	if err := c.out.flush(); err != nil {
		return zero, err
	}
	c.be.SetAuthType(authType)
	msg, err := c.be.Receive()
	if err != nil {
		return zero, err
	}
	m, ok := msg.(M)
	if !ok {
		return zero, protocolViolation("expected SASL response, got message type %T", msg)
	}
	return m, nil
}

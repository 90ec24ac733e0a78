package rpc

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// authenticator runs the authentication exchange after the startup
// message, ending with AuthenticationOk. A mode that needs the client's
// answers (SCRAM-SHA-256) reads them from c.be, calling c.be.SetAuthType
// before each Receive.
type authenticator interface {
	authenticate(c *conn) error
}

func newAuthenticator(mode string) (authenticator, error) {
	switch mode {
	case "trust":
		return trust{}, nil
	case "":
		return nil, fmt.Errorf(`rpc: Config.Auth is empty: set it to "trust" to accept every client without a password`)
	}
	return nil, fmt.Errorf(`rpc: Config.Auth %q is not supported: only "trust" exists yet (scram-sha-256 is planned)`, mode)
}

// trust accepts every client.
type trust struct{}

func (trust) authenticate(c *conn) error {
	c.out.send(&pgproto3.AuthenticationOk{})
	return nil
}

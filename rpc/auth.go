package rpc

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// authenticator runs the authentication exchange after the startup
// message. A mode that needs the client's answers (SCRAM-SHA-256) reads
// them from be, calling be.SetAuthType before each Receive.
type authenticator interface {
	authenticate(be *pgproto3.Backend, user string) error
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

func (trust) authenticate(be *pgproto3.Backend, _ string) error {
	be.Send(&pgproto3.AuthenticationOk{})
	return nil
}

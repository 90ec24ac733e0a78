// Package pgstartup reads PostgreSQL's startup packets — StartupMessage,
// SSLRequest, GSSENCRequest, CancelRequest — for the two servers of the
// protocol in vecside, the sidecar's (rpc) and the proxy's.
package pgstartup

import (
	"encoding/binary"
	"fmt"
	"io"
)

// MaxPacket is PostgreSQL's MAX_STARTUP_PACKET_LENGTH.
const MaxPacket = 10000

// LengthError is a startup packet's length out of range: a protocol
// violation.
type LengthError int32

func (e LengthError) Error() string {
	return fmt.Sprintf("invalid length of startup packet: %d", int32(e))
}

// ReadPacket reads one length-prefixed startup packet with exact reads
// and returns its body: nothing past it is consumed, so that a TLS
// handshake after an SSLRequest would start at the right byte (the
// CVE-2021-23214 class).
func ReadPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 8 || n > MaxPacket {
		return nil, LengthError(n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

package rpc

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/secure/precis"
)

// SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL runs it: the user
// name in the client's messages is ignored for the startup packet's, and
// SCRAM-SHA-256-PLUS binds the exchange to the TLS server certificate
// (tls-server-end-point, RFC 5929).

const (
	scramMechanism     = "SCRAM-SHA-256"
	scramPlusMechanism = "SCRAM-SHA-256-PLUS"
	scramCBindType     = "tls-server-end-point"
	// DefaultScramIterations is PostgreSQL's scram_iterations default.
	DefaultScramIterations = 4096
	scramSaltLen           = 16
	scramNonceLen          = 18 // random bytes, base64 in the message
)

// Verifier is a SCRAM-SHA-256 password verifier: what PostgreSQL keeps in
// pg_authid.rolpassword, from which the server can check a client's proof
// but not recover the password or pose as the client.
type Verifier struct {
	Iterations int
	Salt       []byte
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// NewVerifier derives the verifier of password with a random salt.
func NewVerifier(password string, iterations int) (Verifier, error) {
	salt := make([]byte, scramSaltLen)
	rand.Read(salt)
	salted, err := pbkdf2.Key(sha256.New, normalizePassword(password), salt, iterations, sha256.Size)
	if err != nil {
		return Verifier{}, fmt.Errorf("rpc: %w", err)
	}
	clientKey := scramHMAC(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return Verifier{Iterations: iterations, Salt: salt, StoredKey: stored[:], ServerKey: scramHMAC(salted, "Server Key")}, nil
}

// normalizePassword prepares a password as libpq and pgx do (SASLprep,
// here its successor PRECIS OpaqueString), keeping it unchanged where
// that fails, as PostgreSQL does.
func normalizePassword(password string) string {
	for _, r := range password {
		if r >= unicode.MaxASCII {
			if n, err := precis.OpaqueString.String(password); err == nil {
				return n
			}
			break
		}
	}
	return password
}

// String is the verifier in PostgreSQL's form:
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, base64.
func (v Verifier) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", scramMechanism, v.Iterations, b64(v.Salt), b64(v.StoredKey), b64(v.ServerKey))
}

// ParseVerifier reads a verifier in PostgreSQL's form.
func ParseVerifier(s string) (Verifier, error) {
	bad := func(why string) (Verifier, error) {
		return Verifier{}, fmt.Errorf("not a SCRAM-SHA-256 verifier (SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>): %s", why)
	}
	rest, ok := strings.CutPrefix(s, scramMechanism+"$")
	if !ok {
		return bad("it does not start with SCRAM-SHA-256$ (md5 and plain passwords are not accepted: make one with vecside passwd)")
	}
	params, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return bad("no $ before the keys")
	}
	iter, salt, ok1 := strings.Cut(params, ":")
	stored, server, ok2 := strings.Cut(keys, ":")
	if !ok1 || !ok2 {
		return bad("a part is missing")
	}
	var v Verifier
	var err error
	if v.Iterations, err = strconv.Atoi(iter); err != nil || v.Iterations < 1 {
		return bad("the iteration count is not a positive number")
	}
	dec := base64.StdEncoding.DecodeString
	if v.Salt, err = dec(salt); err != nil || len(v.Salt) == 0 {
		return bad("the salt is not base64")
	}
	if v.StoredKey, err = dec(stored); err != nil || len(v.StoredKey) != sha256.Size {
		return bad("StoredKey is not 32 bytes of base64")
	}
	if v.ServerKey, err = dec(server); err != nil || len(v.ServerKey) != sha256.Size {
		return bad("ServerKey is not 32 bytes of base64")
	}
	return v, nil
}

func scramHMAC(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// errScramMalformed is a SCRAM message that does not follow the grammar.
func errScramMalformed(format string, args ...any) *pgError {
	e := protocolViolation("malformed SCRAM message")
	e.detail = fmt.Sprintf(format, args...)
	return e
}

// clientFirst is the client-first-message.
type clientFirst struct {
	gs2Header string // "n,,", "y,," or "p=tls-server-end-point,,"
	cbFlag    byte   // 'n', 'y' or 'p'
	bare      string // client-first-message-bare
	nonce     string
}

// parseClientFirst reads a client-first-message:
// gs2-header ("n" | "y" | "p=" cb-name) "," [authzid] "," then
// "n=" user "," "r=" nonce ["," extensions].
func parseClientFirst(data []byte) (clientFirst, error) {
	var m clientFirst
	s := string(data)
	flag, rest, ok := strings.Cut(s, ",")
	if !ok {
		return m, errScramMalformed("The client's first message has no GS2 header.")
	}
	switch {
	case flag == "n" || flag == "y":
	case flag == "p="+scramCBindType:
	case strings.HasPrefix(flag, "p="):
		return m, protocolViolation("unsupported SCRAM channel-binding type %q", flag[2:])
	default:
		return m, errScramMalformed("Unexpected channel-binding flag %q.", flag)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return m, errScramMalformed("The GS2 header does not end.")
	}
	if authzid != "" {
		return m, &pgError{code: codeFeatureNotSupported, msg: "client uses authorization identity, but it is not supported", fatal: true}
	}
	m.cbFlag, m.gs2Header, m.bare = flag[0], s[:len(s)-len(bare)], bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return m, errScramMalformed("Expected n=<user>,r=<nonce>.")
	}
	m.nonce = attrs[1][2:]
	if !validNonce(m.nonce) {
		return m, errScramMalformed("The client's nonce is empty or has characters outside printable ASCII, or a comma.")
	}
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "m=") {
			return m, errScramMalformed("Mandatory extensions are not supported.")
		}
	}
	return m, nil
}

func validNonce(n string) bool {
	for i := 0; i < len(n); i++ {
		if n[i] < 0x21 || n[i] > 0x7e || n[i] == ',' {
			return false
		}
	}
	return n != ""
}

// clientFinal is the client-final-message.
type clientFinal struct {
	cbind        []byte // decoded c=
	nonce        string
	proof        []byte
	withoutProof string // the message up to ",p=", for the AuthMessage
}

// parseClientFinal reads "c=" cbind "," "r=" nonce ["," extensions] ","
// "p=" proof.
func parseClientFinal(data []byte) (clientFinal, error) {
	var m clientFinal
	s := string(data)
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return m, errScramMalformed("The client's final message has no proof.")
	}
	m.withoutProof = s[:i]
	attrs := strings.Split(m.withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return m, errScramMalformed("Expected c=<binding>,r=<nonce>.")
	}
	var err error
	if m.cbind, err = base64.StdEncoding.DecodeString(attrs[0][2:]); err != nil {
		return m, errScramMalformed("The channel binding is not base64.")
	}
	m.nonce = attrs[1][2:]
	if m.proof, err = base64.StdEncoding.DecodeString(s[i+3:]); err != nil || len(m.proof) != sha256.Size {
		return m, errScramMalformed("The proof is not 32 bytes of base64.")
	}
	return m, nil
}

// scramServer is the server's side of one exchange.
type scramServer struct {
	v          Verifier
	doomed     bool   // no such user: the exchange runs, and fails at the end
	cbData     []byte // the certificate's hash when TLS is on, else nil
	first      clientFirst
	mechanism  string
	nonce      string // the client's nonce and the server's
	serverMsg1 string
}

// start checks the client's first message against the mechanism it chose
// and returns the server-first-message.
func (x *scramServer) start(mechanism string, data []byte) (string, error) {
	var err error
	if x.first, err = parseClientFirst(data); err != nil {
		return "", err
	}
	x.mechanism = mechanism
	switch {
	case mechanism == scramPlusMechanism && x.cbData == nil:
		return "", protocolViolation("client selected an invalid SASL authentication mechanism")
	case mechanism == scramPlusMechanism && x.first.cbFlag != 'p':
		return "", errScramMalformed("The client selected SCRAM-SHA-256-PLUS but did not send channel binding.")
	case mechanism == scramMechanism && x.first.cbFlag == 'p':
		return "", errScramMalformed("The client selected SCRAM-SHA-256 without channel binding, but the SCRAM message includes channel binding data.")
	case mechanism == scramMechanism && x.first.cbFlag == 'y' && x.cbData != nil:
		// The server offered SCRAM-SHA-256-PLUS: a client that could bind
		// and thinks the server cannot was told otherwise on the way.
		e := protocolViolation("SCRAM channel binding negotiation error")
		e.detail = "The client supports SCRAM channel binding but thinks the server does not. However, this server does support channel binding."
		return "", e
	}
	b := make([]byte, scramNonceLen)
	rand.Read(b)
	x.nonce = x.first.nonce + base64.RawStdEncoding.EncodeToString(b)
	x.serverMsg1 = fmt.Sprintf("r=%s,s=%s,i=%d", x.nonce, base64.StdEncoding.EncodeToString(x.v.Salt), x.v.Iterations)
	return x.serverMsg1, nil
}

// errPasswordFailed is what every failed password check gets, whether
// the user exists or not.
func errPasswordFailed(user string) *pgError {
	return &pgError{code: codeInvalidPassword, msg: fmt.Sprintf("password authentication failed for user %q", user), fatal: true}
}

// finish checks the client's final message and proof and returns the
// server-final-message.
func (x *scramServer) finish(data []byte, user string) (string, error) {
	m, err := parseClientFinal(data)
	if err != nil {
		return "", err
	}
	want := []byte(x.first.gs2Header)
	if x.first.cbFlag == 'p' {
		want = append(want, x.cbData...)
	}
	if !bytes.Equal(m.cbind, want) {
		return "", protocolViolation("SCRAM channel binding check failed")
	}
	if m.nonce != x.nonce {
		return "", errScramMalformed("Nonce does not match.")
	}
	authMessage := x.first.bare + "," + x.serverMsg1 + "," + m.withoutProof
	signature := scramHMAC(x.v.StoredKey, authMessage)
	clientKey := make([]byte, sha256.Size)
	subtle.XORBytes(clientKey, m.proof, signature)
	stored := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(stored[:], x.v.StoredKey) != 1 || x.doomed {
		return "", errPasswordFailed(user)
	}
	return "v=" + base64.StdEncoding.EncodeToString(scramHMAC(x.v.ServerKey, authMessage)), nil
}

// mockVerifier is the verifier an unknown user is given, so that the
// exchange looks the same as for a user who exists: the salt is derived
// from the name and a secret of the server, so it stays the same across
// attempts, as a real user's does.
func mockVerifier(secret []byte, user string, iterations int) Verifier {
	salt := scramHMAC(secret, "salt:"+user)[:scramSaltLen]
	key := scramHMAC(secret, "key:"+user)
	return Verifier{Iterations: iterations, Salt: salt, StoredKey: key, ServerKey: key}
}

var errNoUsers = errors.New("rpc: scram-sha-256 needs Config.Users: make a users file with vecside passwd")

package rpc

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/internal/testcert"
)

const (
	testUser     = "alice"
	testPassword = "down the rabbit hole"
)

// testUsers has testUser, with testPassword, and bob.
func testUsers(t testing.TB) *Users {
	t.Helper()
	var lines []string
	for user, password := range map[string]string{testUser: testPassword, "bob": "bob's own"} {
		v, err := NewVerifier(password, DefaultScramIterations)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, UserLine(user, v))
	}
	u, err := ParseUsers(strings.NewReader("# test users\n" + strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// scramServer starts a server that asks for passwords, with TLS if cert
// is not nil.
func startSCRAMServer(t *testing.T, cat Catalog, cert *testcert.Cert, required bool) (*Server, string) {
	cfg := Config{Catalog: cat, Users: testUsers(t), TLSRequired: required}
	if cert != nil {
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	}
	return startServerConfig(t, cfg)
}

// dsnFor is a connection URL for user with password; ssl holds the
// sslmode and what goes with it, e.g. "sslmode=disable".
func dsnFor(addr, user, password, ssl string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("postgres://%s:%s@%s:%s/db?connect_timeout=5&%s", url.PathEscape(user), url.PathEscape(password), host, port, ssl)
}

// sslModes are the ways the tests connect with TLS on: none, and
// verified with channel binding required or disabled (gs2 "n").
func sslModes(cert *testcert.Cert) []string {
	if cert == nil {
		return []string{"sslmode=disable"}
	}
	verify := "sslmode=verify-full&sslrootcert=" + url.QueryEscape(cert.CertFile)
	return []string{"sslmode=disable", "sslmode=require", verify + "&channel_binding=require", verify + "&channel_binding=disable"}
}

// TestSCRAMWithPgx: every pgx exec mode logs in with SCRAM-SHA-256, with
// and without TLS, and with channel binding (SCRAM-SHA-256-PLUS).
func TestSCRAMWithPgx(t *testing.T) {
	ix, data := newTestIndexer(t)
	cert := testcert.New(t)
	_, addr := startSCRAMServer(t, ix, &cert, false)
	q := []float32{0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8}
	want := data["items_int8"].bruteForce(q, 5)
	for _, ssl := range sslModes(&cert) {
		for _, mode := range execModes {
			cfg, err := pgx.ParseConfig(dsnFor(addr, testUser, testPassword, ssl))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(testContext(t), cfg)
			if err != nil {
				t.Fatalf("%s, %v: %v", ssl, mode, err)
			}
			got := queryHits(t, conn, "SELECT * FROM knn($1, $2, $3)", "items_int8", q, 5)
			checkHits(t, got, want)
			if _, isTLS := conn.PgConn().Conn().(*tls.Conn); isTLS != (ssl != "sslmode=disable") {
				t.Errorf("%s: TLS is %v", ssl, isTLS)
			}
			conn.Close(testContext(t))
		}
	}
}

// TestSCRAMRefuses: a wrong password, an empty one and an unknown user all
// get FATAL 28P01 with the same message form, and the connection is
// closed; they are counted.
func TestSCRAMRefuses(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, addr := startSCRAMServer(t, ix, nil, false)
	for _, c := range []struct{ user, password string }{
		{testUser, "wrong"}, {testUser, ""}, {"mallory", testPassword}, {"bob", testPassword},
	} {
		_, err := pgconn.Connect(testContext(t), dsnFor(addr, c.user, c.password, "sslmode=disable"))
		wantMsg := fmt.Sprintf("password authentication failed for user %q", c.user)
		if sqlstate(err) != codeInvalidPassword || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("%s with %q: %v, want 28P01 %s", c.user, c.password, err, wantMsg)
		}
		r := dialRaw(t, addr)
		got := rawSCRAM(t, r, c.user, c.password, "n,,", nil)
		if e, ok := got[len(got)-1].(*pgproto3.ErrorResponse); !ok || e.Code != codeInvalidPassword || e.Severity != "FATAL" {
			t.Fatalf("%s: got %s", c.user, describeMsgs(got))
		}
		if _, err := r.fe.Receive(); err == nil {
			t.Errorf("%s: the connection stays open after a failed login", c.user)
		}
	}
	if n := srv.faults.snapshot()[faultAuthFailed]; n != 8 {
		t.Errorf("%d failed logins counted, want 8", n)
	}
	if _, err := pgconn.Connect(testContext(t), dsnFor(addr, testUser, testPassword, "sslmode=disable")); err != nil {
		t.Errorf("the right password: %v", err)
	}
}

// TestSCRAMMockExchange: an unknown user gets the same salt each time, and
// the iteration count real users have, so that the exchange does not
// tell whether a user exists.
func TestSCRAMMockExchange(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startSCRAMServer(t, ix, nil, false)
	first := func(user string) string { return serverFirstSalt(t, addr, user) }
	nobody := first("nobody")
	if again := first("nobody"); again != nobody {
		t.Errorf("an unknown user's salt changed: %q, then %q", nobody, again)
	}
	alice := first(testUser)
	if nobody == alice || !strings.HasSuffix(nobody, ",i=4096") || !strings.HasSuffix(alice, ",i=4096") {
		t.Errorf("unknown %q, known %q: want different salts and the same iterations", nobody, alice)
	}
}

// TestMockSaltOutlivesRestart: a server started again with the same
// MockAuthSecret shows an unknown user the same salt, as a real user's
// stays the same; without it, the salt changing at a restart told which
// users exist.
func TestMockSaltOutlivesRestart(t *testing.T) {
	ix, _ := newTestIndexer(t)
	users := testUsers(t)
	salt := func(secret []byte) string {
		_, addr := startServerConfig(t, Config{Catalog: ix, Users: users, MockAuthSecret: secret})
		return serverFirstSalt(t, addr, "nobody")
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	before, after := salt(secret), salt(secret)
	if before != after {
		t.Errorf("an unknown user's salt changed across a restart: %q, then %q", before, after)
	}
	if other := salt([]byte("another secret, another salt....")); other == before {
		t.Errorf("two secrets gave the same salt %q", other)
	}
}

// serverFirstSalt starts a SCRAM exchange as user and returns the salt
// and iterations of the server's first message.
func serverFirstSalt(t *testing.T, addr, user string) string {
	t.Helper()
	r := dialRaw(t, addr)
	r.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": user}})
	r.fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: scramMechanism, Data: []byte("n,,n=,r=abc")})
	r.fe.Flush()
	for {
		m, err := r.fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := m.(*pgproto3.AuthenticationSASLContinue); ok {
			s := string(c.Data)
			return s[strings.Index(s, ",s="):] // the salt and the iterations
		}
	}
}

// rawSCRAM logs in on r as user with password, with the given GS2 header
// and channel binding data, and returns what the server sent after the
// client's last message.
func rawSCRAM(t *testing.T, r *rawConn, user, password, gs2 string, cbData []byte) []pgproto3.BackendMessage {
	t.Helper()
	r.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": user}})
	r.fe.Flush()
	m, err := r.fe.Receive()
	if _, ok := m.(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("got %T %v, want AuthenticationSASL", m, err)
	}
	mechanism := scramMechanism
	if strings.HasPrefix(gs2, "p=") {
		mechanism = scramPlusMechanism
	}
	bare := "n=,r=clientnonce"
	r.fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: mechanism, Data: []byte(gs2 + bare)})
	r.fe.Flush()
	m, err = r.fe.Receive()
	cont, ok := m.(*pgproto3.AuthenticationSASLContinue)
	if !ok {
		return []pgproto3.BackendMessage{copyMsg(m)}
	}
	serverFirst := string(cont.Data)
	var nonce, salt string
	var iterations int
	for _, attr := range strings.Split(serverFirst, ",") {
		switch attr[:2] {
		case "r=":
			nonce = attr[2:]
		case "s=":
			salt = attr[2:]
		case "i=":
			iterations, _ = strconv.Atoi(attr[2:])
		}
	}
	saltBytes, _ := base64.StdEncoding.DecodeString(salt)
	salted, _ := pbkdf2.Key(sha256.New, password, saltBytes, iterations, 32)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString(append([]byte(gs2), cbData...)) + ",r=" + nonce
	authMessage := bare + "," + serverFirst + "," + withoutProof
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	signature := hmacSHA256(stored[:], authMessage)
	proof := make([]byte, 32)
	for i := range proof {
		proof[i] = clientKey[i] ^ signature[i]
	}
	r.fe.Send(&pgproto3.SASLResponse{Data: []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))})
	return r.until()
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// dialTLS opens a raw connection and starts TLS on it, verifying cert.
func dialTLS(t *testing.T, addr string, cert testcert.Cert) (*rawConn, *tls.Conn) {
	t.Helper()
	r := dialRaw(t, addr)
	r.nc.Write(binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, sslRequestCode))
	var b [1]byte
	if _, err := r.nc.Read(b[:]); err != nil || b[0] != 'S' {
		t.Fatalf("SSLRequest: got %q, %v; want S", b[0], err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf(t, cert))
	tc := tls.Client(r.nc, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t, tc, pgproto3.NewFrontend(tc, tc)}, tc
}

func leaf(t *testing.T, cert testcert.Cert) *x509.Certificate {
	c, err := x509.ParseCertificate(cert.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChannelBinding: with TLS on, the right binding logs in; a client
// that says it could bind but thinks the server cannot ('y', a downgrade)
// and a binding to another certificate are refused.
func TestChannelBinding(t *testing.T) {
	ix, _ := newTestIndexer(t)
	cert := testcert.New(t)
	_, addr := startSCRAMServer(t, ix, &cert, false)
	good := sha256.Sum256(leaf(t, cert).Raw)
	for _, c := range []struct {
		name, gs2 string
		cb        []byte
		code      string // "" for success
	}{
		{"tls-server-end-point", "p=tls-server-end-point,,", good[:], ""},
		{"no binding", "n,,", nil, ""},
		{"downgrade", "y,,", nil, codeProtocolViolation},
		{"another certificate", "p=tls-server-end-point,,", make([]byte, 32), codeProtocolViolation},
		{"another binding type", "p=tls-unique,,", nil, codeProtocolViolation},
	} {
		r, _ := dialTLS(t, addr, cert)
		got := rawSCRAM(t, r, testUser, testPassword, c.gs2, c.cb)
		last := got[len(got)-1]
		e, failed := last.(*pgproto3.ErrorResponse)
		switch {
		case c.code == "" && failed:
			t.Errorf("%s: %s %s", c.name, e.Code, e.Message)
		case c.code != "" && (!failed || e.Code != c.code):
			t.Errorf("%s: got %s, want %s", c.name, describeMsgs(got), c.code)
		}
	}
	// Without TLS, PLUS is not offered, and 'y' is fine.
	_, plain := startSCRAMServer(t, ix, nil, false)
	if got := rawSCRAM(t, dialRaw(t, plain), testUser, testPassword, "y,,", nil); describeMsgs(got[len(got)-1:]) != "ReadyForQuery" {
		t.Errorf("'y' without TLS: %s", describeMsgs(got))
	}
}

// TestTLSRequired: a plaintext StartupMessage is refused with 28000, TLS
// logs in, and a plaintext CancelRequest (as pgx and libpq before 17 send
// it) still cancels, while one with a wrong key cancels nothing.
func TestTLSRequired(t *testing.T) {
	cat := newSlowCatalog(t)
	cert := testcert.New(t)
	_, addr := startSCRAMServer(t, cat, &cert, true)
	got := dialRaw(t, addr).startup(pgproto3.ProtocolVersion30, map[string]string{"user": testUser})
	if e, ok := got[0].(*pgproto3.ErrorResponse); !ok || e.Code != codeInvalidAuthorization || e.Severity != "FATAL" {
		t.Fatalf("plaintext startup: %s, want FATAL 28000", describeMsgs(got))
	}
	_, err := pgconn.Connect(testContext(t), dsnFor(addr, testUser, testPassword, "sslmode=disable"))
	if sqlstate(err) != codeInvalidAuthorization {
		t.Fatalf("pgx without TLS: %v, want 28000", err)
	}
	conn, err := pgx.Connect(testContext(t), dsnFor(addr, testUser, testPassword, "sslmode=require"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(testContext(t))
	key := &pgproto3.BackendKeyData{ProcessID: conn.PgConn().PID(), SecretKey: conn.PgConn().SecretKey()}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(testContext(t), "SELECT * FROM knn('slow', '[1]', 1)")
		done <- err
	}()
	<-cat.entered
	wrong := *key
	wrong.SecretKey = []byte{9, 9, 9, 9}
	sendCancel(t, addr, &wrong)
	select {
	case err := <-done:
		t.Fatalf("a cancel with a wrong key ended the search: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	sendCancel(t, addr, key)
	select {
	case err := <-done:
		if sqlstate(err) != codeQueryCanceled {
			t.Fatalf("after a plaintext cancel: %v, want 57014", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a plaintext cancel with the right key did not cancel")
	}
}

// TestPsqlSCRAM: psql (libpq) logs in with a password, with and without
// TLS, verified and with channel binding; a wrong password fails.
func TestPsqlSCRAM(t *testing.T) {
	ix, _ := newTestIndexer(t)
	cert := testcert.New(t)
	_, addr := startSCRAMServer(t, ix, &cert, false)
	host, port, _ := net.SplitHostPort(addr)
	psql := "/usr/lib/postgresql/15/bin/psql"
	if _, err := os.Stat(psql); err != nil {
		t.Fatal("psql is not installed: install postgresql-client-15 (scripts/install-postgres does)")
	}
	run := func(password string, env ...string) (string, error) {
		cmd := exec.Command(psql, "-X", "-A", "-t", "-h", host, "-p", port, "-U", testUser, "-d", "db", "-c", "SELECT 42")
		cmd.Env = append(os.Environ(), append(env, "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=5")...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, env := range [][]string{
		{"PGSSLMODE=disable"},
		{"PGSSLMODE=require"},
		{"PGSSLMODE=verify-full", "PGSSLROOTCERT=" + cert.CertFile, "PGCHANNELBINDING=require"},
	} {
		if out, err := run(testPassword, env...); err != nil || out != "42\n" {
			t.Errorf("%v: %q, %v", env, out, err)
		}
		if out, err := run("wrong", env...); err == nil || !strings.Contains(out, `password authentication failed for user "alice"`) {
			t.Errorf("%v, a wrong password: %q, %v", env, out, err)
		}
	}
}

// TestSetUsers: a new set of users takes effect for the next login.
func TestSetUsers(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, addr := startSCRAMServer(t, ix, nil, false)
	login := func(user, password string) error {
		conn, err := pgconn.Connect(testContext(t), dsnFor(addr, user, password, "sslmode=disable"))
		if err == nil {
			conn.Close(testContext(t))
		}
		return err
	}
	v, _ := NewVerifier("new", DefaultScramIterations)
	u, _ := ParseUsers(strings.NewReader(UserLine("carol", v)))
	if err := srv.SetUsers(u); err != nil {
		t.Fatal(err)
	}
	if err := login("carol", "new"); err != nil {
		t.Errorf("a user added: %v", err)
	}
	if err := login(testUser, testPassword); sqlstate(err) != codeInvalidPassword {
		t.Errorf("a user removed: %v, want 28P01", err)
	}
	trusting, _ := startServer(t, ix)
	if trusting.SetUsers(u) == nil {
		t.Error("SetUsers on a trust server succeeded")
	}
}

func TestParseUsers(t *testing.T) {
	v, _ := NewVerifier("pw", 4096)
	good := UserLine(`we"ird`, v)
	u, err := ParseUsers(strings.NewReader("; comment\n\n" + good + "\n"))
	if err != nil || u.Len() != 1 {
		t.Fatalf("%v, %v", u, err)
	}
	if got, ok := u.lookup(`we"ird`); !ok || got.String() != v.String() {
		t.Errorf("lookup: %v %v", got, ok)
	}
	for _, bad := range []string{
		`"app" "md5a3556571e93b0d20722ba62be61e8c2d"`,
		`"app" "plain password"`,
		`app SCRAM-SHA-256$4096:abc$def:ghi`,
		good + "\n" + good,
		`"app" "` + v.String() + `" extra`,
		`"app" "SCRAM-SHA-256$0:` + v.String()[len("SCRAM-SHA-256$4096:"):] + `"`,
	} {
		if _, err := ParseUsers(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/testcert"
	"github.com/vecside/vecside/rpc/internal/pgstartup"
)

// The fuzz targets feed bytes to the server as a client would send them:
// the startup and authentication path (FuzzStartup), the message loop
// after a startup (FuzzMessages), the SCRAM exchange's parsers
// (FuzzSCRAM) and the SQL parser (FuzzParse, in parser_test.go). A panic
// anywhere, even one the server recovers from, fails the input. The
// checked-in corpus is in testdata/fuzz; scripts/test runs each target
// for a few seconds.

// scriptConn is a client connection that sends a fixed script and
// swallows the replies; its deadlines do nothing.
type scriptConn struct{ r *bytes.Reader }

func (c *scriptConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *scriptConn) Write(b []byte) (int, error) { return len(b), nil }
func (c *scriptConn) Close() error                { return nil }
func (c *scriptConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6433}
}
func (c *scriptConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// errorCounter counts the ERROR records a server logs: a recovered panic
// is one.
type errorCounter struct{ n atomic.Int64 }

func (h *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *errorCounter) WithGroup(string) slog.Handler                { return h }
func (h *errorCounter) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}

// quickCatalog bounds every search to a few milliseconds, so that an
// input that sets a long timeout or waits for an LSN does not stall the
// fuzzer.
type quickCatalog struct{ *indexer.Indexer }

func (q quickCatalog) Search(ctx context.Context, name string, v []float32, k int, opts indexer.SearchOptions) (indexer.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	return q.Indexer.Search(ctx, name, v, k, opts)
}

// fuzzServer is a server for fuzzing: SCRAM and TLS if scram, else
// trust; no pause after a wrong cancel key.
func fuzzServer(f *testing.F, scram bool) (*Server, *errorCounter) {
	ix, _ := newTestIndexer(f)
	errs := &errorCounter{}
	cfg := Config{Catalog: quickCatalog{ix}, Auth: AuthTrust, Logger: slog.New(errs)}
	if scram {
		cert := testcert.New(f)
		cfg.Auth, cfg.Users = AuthSCRAM, testUsers(f)
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	}
	srv, err := NewServer(cfg)
	if err != nil {
		f.Fatal(err)
	}
	srv.cancelPause = 0
	return srv, errs
}

// runScript serves one connection that sends script.
func runScript(t *testing.T, srv *Server, errs *errorCounter, script []byte) {
	before := errs.n.Load()
	st, _ := pgstartup.NewAdmission(1, 1, 0).Admit(&scriptConn{bytes.NewReader(script)})
	srv.serveConn(context.Background(), st)
	if errs.n.Load() != before {
		t.Fatalf("the server logged an error (a recovered panic) for %q", script)
	}
}

// encode concatenates the wire form of messages.
func encode(msgs ...interface{ Encode([]byte) ([]byte, error) }) []byte {
	var b []byte
	for _, m := range msgs {
		b, _ = m.Encode(b)
	}
	return b
}

func startupMsg(params ...string) *pgproto3.StartupMessage {
	m := &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": testUser}}
	for i := 0; i+1 < len(params); i += 2 {
		m.Parameters[params[i]] = params[i+1]
	}
	return m
}

func FuzzStartup(f *testing.F) {
	srv, errs := fuzzServer(f, true)
	ssl := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, sslRequestCode)
	gss := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, gssEncRequestCode)
	sasl := encode(startupMsg(),
		&pgproto3.SASLInitialResponse{AuthMechanism: scramMechanism, Data: []byte("n,,n=,r=rOprNGfwEbeRWgbNEkqO")},
		&pgproto3.SASLResponse{Data: []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")})
	for _, seed := range [][]byte{
		sasl,
		encode(startupMsg(), &pgproto3.SASLInitialResponse{AuthMechanism: scramPlusMechanism, Data: []byte("p=tls-server-end-point,,n=,r=abc")}),
		encode(startupMsg(), &pgproto3.SASLInitialResponse{AuthMechanism: scramMechanism, Data: []byte("y,a=x,n=,r=abc,m=ext")}),
		append(append([]byte{}, gss...), encode(startupMsg("options", "-c vecside.oversample=2 --application_name=x", "_pq_.x", "1"))...),
		append(append([]byte{}, ssl...), 0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0),
		append(append([]byte{}, ssl...), ssl...),
		encode(&pgproto3.CancelRequest{ProcessID: 1, SecretKey: []byte{1, 2, 3, 4}}),
		{0, 0, 0, 8, 0, 2, 0, 0},
		{0, 0, 0, 9, 0, 3, 0, 0, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script []byte) { runScript(t, srv, errs, script) })
}

func FuzzMessages(f *testing.F) {
	srv, errs := fuzzServer(f, false)
	start := encode(startupMsg())
	q := "'[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8]'"
	for _, seed := range [][]byte{
		encode(&pgproto3.Query{String: "SELECT * FROM knn('items_int8', " + q + ", 5); SELECT id FROM vecside_status()"}),
		encode(&pgproto3.Query{String: "BEGIN; SET vecside.oversample = 2; SHOW vecside.oversample; SELECT 1; COMMIT; RESET ALL; DISCARD ALL"}),
		encode(&pgproto3.Parse{Name: "s", Query: "SELECT * FROM knn($1, $2::real[], $3, $4)"},
			&pgproto3.Describe{ObjectType: 'S', Name: "s"},
			&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p", ParameterFormatCodes: []int16{0, 1, 1, 0},
				Parameters:        [][]byte{[]byte("items_text"), {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 188, 0, 0, 0, 8, 0, 0, 0, 1}, {0, 0, 0, 3}, []byte("oversample=1")},
				ResultFormatCodes: []int16{1}},
			&pgproto3.Describe{ObjectType: 'P', Name: "p"},
			&pgproto3.Execute{Portal: "p", MaxRows: 1},
			&pgproto3.Execute{Portal: "p"},
			&pgproto3.Close{ObjectType: 'P', Name: "p"},
			&pgproto3.Sync{}),
		encode(&pgproto3.Parse{Query: "SELECT 1; SELECT 2"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{}, &pgproto3.Sync{}, &pgproto3.Terminate{}),
		encode(&pgproto3.Query{String: "SELECT * FROM knn(E'items_\\x69nt4', " + q + ", 3, 'timeout=1ms')"}, &pgproto3.FunctionCall{}, &pgproto3.CopyDone{}),
		{'y', 0, 0, 0, 4},
		{'Q', 0, 0, 0, 3},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		runScript(t, srv, errs, append(append([]byte{}, start...), script...))
	})
}

func FuzzSCRAM(f *testing.F) {
	v, err := NewVerifier(testPassword, 16)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(scramMechanism, false, []byte("n,,n=,r=abc"), []byte("c=biws,r=abcdef,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add(scramPlusMechanism, true, []byte("p=tls-server-end-point,,n=x,r=abc,e=1"), []byte("c=cD10bHMtc2VydmVyLWVuZC1wb2ludCws,r=abc,p=,p="))
	f.Add(scramMechanism, true, []byte("y,,n=,r=abc"), []byte(""))
	f.Fuzz(func(t *testing.T, mechanism string, tls bool, first, final []byte) {
		x := &scramServer{v: v}
		if tls {
			x.cbData = make([]byte, 32)
		}
		if _, err := x.start(mechanism, first); err != nil {
			if toPgError(err).code == codeInternalError {
				t.Fatalf("unmapped error %v", err)
			}
			return
		}
		if _, err := x.finish(final, "u"); err == nil {
			t.Fatalf("%q then %q logged in without the password", first, final)
		}
	})
}

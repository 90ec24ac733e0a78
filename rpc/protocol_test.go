package rpc

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// rawConn is a hand-driven frontend, for what drivers never send.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	fe *pgproto3.Frontend
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t, nc, pgproto3.NewFrontend(nc, nc)}
}

// startup sends a StartupMessage and returns every message up to the
// first ReadyForQuery.
func (r *rawConn) startup(version uint32, params map[string]string) []pgproto3.BackendMessage {
	r.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: version, Parameters: params})
	return r.until()
}

// send sends msgs and returns the replies up to ReadyForQuery.
func (r *rawConn) send(msgs ...pgproto3.FrontendMessage) []pgproto3.BackendMessage {
	for _, m := range msgs {
		r.fe.Send(m)
	}
	return r.until()
}

func (r *rawConn) until() []pgproto3.BackendMessage {
	r.t.Helper()
	if err := r.fe.Flush(); err != nil {
		r.t.Fatal(err)
	}
	var out []pgproto3.BackendMessage
	for {
		m, err := r.fe.Receive()
		if err != nil {
			r.t.Fatalf("receive after %s: %v", describeMsgs(out), err)
		}
		m = copyMsg(m)
		out = append(out, m)
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			return out
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok && e.Severity == "FATAL" {
			return out
		}
	}
}

// copyMsg detaches a received message from the frontend's buffers.
func copyMsg(m pgproto3.BackendMessage) pgproto3.BackendMessage {
	switch m := m.(type) {
	case *pgproto3.DataRow:
		c := &pgproto3.DataRow{}
		for _, v := range m.Values {
			if v == nil {
				c.Values = append(c.Values, nil)
			} else {
				c.Values = append(c.Values, append([]byte{}, v...))
			}
		}
		return c
	case *pgproto3.ErrorResponse:
		c := *m
		return &c
	case *pgproto3.CommandComplete:
		return &pgproto3.CommandComplete{CommandTag: append([]byte{}, m.CommandTag...)}
	case *pgproto3.ParameterStatus:
		c := *m
		return &c
	case *pgproto3.BackendKeyData:
		return &pgproto3.BackendKeyData{ProcessID: m.ProcessID, SecretKey: append([]byte{}, m.SecretKey...)}
	case *pgproto3.NegotiateProtocolVersion:
		c := *m
		return &c
	}
	return m
}

func describeMsgs(msgs []pgproto3.BackendMessage) string {
	var names []string
	for _, m := range msgs {
		names = append(names, strings.TrimPrefix(reflect.TypeOf(m).String(), "*pgproto3."))
	}
	return strings.Join(names, " ")
}

func TestProtocolViolationCloses(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	r := dialRaw(t, addr)
	r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})
	// A message type that does not exist.
	r.nc.Write([]byte{'y', 0, 0, 0, 4})
	m, err := r.fe.Receive()
	e, ok := m.(*pgproto3.ErrorResponse)
	if err != nil || !ok || e.Code != codeProtocolViolation || e.Severity != "FATAL" {
		t.Fatalf("got %#v, %v; want FATAL 08P01", m, err)
	}
	if _, err := r.fe.Receive(); err == nil {
		t.Fatal("connection still open after a protocol violation")
	}

	// A startup packet with an impossible length.
	r = dialRaw(t, addr)
	r.nc.Write([]byte{0, 0, 0, 2})
	m, err = r.fe.Receive()
	if e, ok := m.(*pgproto3.ErrorResponse); err != nil || !ok || e.Code != codeProtocolViolation {
		t.Fatalf("bad startup length: got %#v, %v; want 08P01", m, err)
	}

	// Bind with a wrong parameter count: the extended protocol's
	// violations close the connection too.
	r = dialRaw(t, addr)
	r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})
	got := r.send(&pgproto3.Parse{Query: "SELECT * FROM knn($1, $2, $3)"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("x")}}, &pgproto3.Sync{})
	if e, ok := got[len(got)-1].(*pgproto3.ErrorResponse); !ok || e.Code != codeProtocolViolation {
		t.Fatalf("got %s, want ParseComplete ErrorResponse(08P01)", describeMsgs(got))
	}
}

func TestStartupNegotiation(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	r := dialRaw(t, addr)
	// SSLRequest and GSSENCRequest are declined with a single 'N'.
	for _, code := range []uint32{sslRequestCode, gssEncRequestCode} {
		pkt := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 8}, code)
		r.nc.Write(pkt)
		var b [1]byte
		if _, err := r.nc.Read(b[:]); err != nil || b[0] != 'N' {
			t.Fatalf("request %d: got %q, %v; want N", code, b[0], err)
		}
	}
	got := r.startup(pgproto3.ProtocolVersion32, map[string]string{"user": "raw", "_pq_.compression": "on", "options": "-c vecside.oversample=2", "application_name": "raw test"})
	npv, ok := got[0].(*pgproto3.NegotiateProtocolVersion)
	if !ok || npv.NewestMinorProtocol != 0 || !reflect.DeepEqual(npv.UnrecognizedOptions, []string{"_pq_.compression"}) {
		t.Fatalf("got %s, want NegotiateProtocolVersion(3.0, _pq_.compression) first", describeMsgs(got))
	}
	status := map[string]string{}
	var key *pgproto3.BackendKeyData
	for _, m := range got {
		switch m := m.(type) {
		case *pgproto3.ParameterStatus:
			status[m.Name] = m.Value
		case *pgproto3.BackendKeyData:
			key = m
		}
	}
	want := map[string]string{
		"server_version": "15.0", "server_encoding": "UTF8", "client_encoding": "UTF8",
		"DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "integer_datetimes": "on",
		"standard_conforming_strings": "on", "TimeZone": "UTC", "is_superuser": "off",
		"session_authorization": "raw", "application_name": "raw test",
	}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("ParameterStatus: got %v, want %v", status, want)
	}
	if key == nil || len(key.SecretKey) != 4 {
		t.Errorf("BackendKeyData: got %#v", key)
	}
	got = r.send(&pgproto3.Query{String: "SHOW vecside.oversample"})
	if row, ok := got[1].(*pgproto3.DataRow); !ok || string(row.Values[0]) != "2" {
		t.Errorf("options -c vecside.oversample=2: got %s", describeMsgs(got))
	}

	// Protocol 2 is refused.
	r = dialRaw(t, addr)
	got = r.startup(2<<16, map[string]string{"user": "raw"})
	if e, ok := got[0].(*pgproto3.ErrorResponse); !ok || e.Code != codeFeatureNotSupported {
		t.Errorf("protocol 2.0: got %s, want 0A000", describeMsgs(got))
	}
}

// TestPortalRowLimit: Execute with a row limit suspends the portal, and
// the next Execute continues it.
func TestPortalRowLimit(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	r := dialRaw(t, addr)
	r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})
	got := r.send(
		&pgproto3.Parse{Name: "s", Query: "SELECT id FROM knn('items_int4', '{0,0,0,0,0,0,0,0}', 5)"},
		&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p"},
		&pgproto3.Execute{Portal: "p", MaxRows: 2},
		&pgproto3.Execute{Portal: "p"},
		&pgproto3.Sync{},
	)
	const want = "ParseComplete BindComplete DataRow DataRow PortalSuspended DataRow DataRow DataRow CommandComplete ReadyForQuery"
	if describeMsgs(got) != want {
		t.Fatalf("got  %s\nwant %s", describeMsgs(got), want)
	}
	if tag := string(got[8].(*pgproto3.CommandComplete).CommandTag); tag != "SELECT 3" {
		t.Errorf("tag %q, want SELECT 3", tag)
	}
	// The portal ended with the implicit transaction; the statement lives.
	got = r.send(&pgproto3.Execute{Portal: "p"}, &pgproto3.Sync{})
	if e, ok := got[0].(*pgproto3.ErrorResponse); !ok || e.Code != codeInvalidCursorName {
		t.Errorf("portal after Sync: got %s, want 34000", describeMsgs(got))
	}
	got = r.send(&pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Close{ObjectType: 'S', Name: "s"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{})
	if d := describeMsgs(got); d != "ParameterDescription RowDescription CloseComplete ErrorResponse ReadyForQuery" {
		t.Errorf("Describe, Close, Describe: got %s", d)
	}
}

func TestSimpleQueryStatements(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	r := dialRaw(t, addr)
	r.startup(pgproto3.ProtocolVersion30, map[string]string{"user": "raw"})
	cases := []struct{ sql, want string }{
		{"SELECT 1; show vecside.timeout;;", "RowDescription DataRow CommandComplete RowDescription DataRow CommandComplete ReadyForQuery"},
		{"-- ping", "EmptyQueryResponse ReadyForQuery"},
		{" /* a /* nested */ comment */ ; ", "EmptyQueryResponse ReadyForQuery"},
		{"SELECT 1; SELECT * FROM knn('nope', '[1]', 1); SELECT 2", "RowDescription DataRow CommandComplete ErrorResponse ReadyForQuery"},
		{"SELECT 1; SELEC 2", "ErrorResponse ReadyForQuery"},
		{"SELECT version()", "RowDescription DataRow CommandComplete ReadyForQuery"},
		{"SELECT * FROM vecside_status()", "RowDescription DataRow DataRow DataRow DataRow DataRow CommandComplete ReadyForQuery"},
		{"BEGIN; COMMIT", "CommandComplete CommandComplete ReadyForQuery"},
		{"COMMIT", "NoticeResponse CommandComplete ReadyForQuery"},
	}
	for _, c := range cases {
		if got := describeMsgs(r.send(&pgproto3.Query{String: c.sql})); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.sql, got, c.want)
		}
	}
}

func TestSetShowReset(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		conn := connect(t, addr, mode)
		ctx := testContext(t)
		show := func(name string) string {
			t.Helper()
			var v string
			if err := conn.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
				t.Fatalf("SHOW %s: %v", name, err)
			}
			return v
		}
		exec := func(sql string) {
			t.Helper()
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		if v := show("vecside.timeout"); v != "30s" {
			t.Errorf("default timeout %q", v)
		}
		exec("SET vecside.timeout = '5s'")
		exec("set session VECSIDE.oversample to 2.5")
		if a, b := show("vecside.timeout"), show("vecside.oversample"); a != "5s" || b != "2.5" {
			t.Errorf("after SET: timeout %q oversample %q", a, b)
		}
		exec("SET vecside.timeout TO 250ms")
		if v := show("vecside.timeout"); v != "250ms" {
			t.Errorf("unquoted 250ms: %q", v)
		}
		exec("RESET vecside.timeout")
		if v := show("vecside.timeout"); v != "30s" {
			t.Errorf("after RESET: %q", v)
		}
		exec("SET vecside.timeout TO DEFAULT")
		exec("RESET ALL")
		if v := show("vecside.oversample"); v != "0" { // the index's default
			t.Errorf("after RESET ALL: %q", v)
		}
		for _, sql := range []string{"SET client_encoding TO 'UTF8'", "set client_encoding to 'utf-8'", "SET extra_float_digits = 3", "SET datestyle TO 'ISO'", "SET application_name = 'app one'"} {
			exec(sql)
		}
		if v := conn.PgConn().ParameterStatus("application_name"); v != "app one" {
			t.Errorf("ParameterStatus application_name %q", v)
		}
		if a, b := show("extra_float_digits"), show("server_version"); a != "3" || b != "15.0" {
			t.Errorf("SHOW extra_float_digits %q server_version %q", a, b)
		}
		// Session options apply to knn: oversample 2 doubles the rows.
		exec("SET vecside.oversample = 2")
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM knn('items_int8', '[0,0,0,0,0,0,0,0]', 3)").Scan(&n); err == nil {
			t.Errorf("count(*) should not parse")
		}
		rows, _ := conn.Query(ctx, "SELECT id FROM knn('items_int8', '[0,0,0,0,0,0,0,0]', 3)")
		for rows.Next() {
			n++
		}
		if rows.Err() != nil || n != 6 {
			t.Errorf("oversample 2, k 3: %d rows, %v", n, rows.Err())
		}
		exec("DISCARD ALL") // drops pgx's cached statements too, as in PostgreSQL
		var v string
		if err := conn.QueryRow(ctx, "SHOW vecside.oversample", pgx.QueryExecModeSimpleProtocol).Scan(&v); err != nil || v != "0" {
			t.Errorf("after DISCARD ALL: %q, %v", v, err)
		}
	}
}

func TestTransactionStatus(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	pc := conn.PgConn()
	ctx := testContext(t)
	step := func(sql, wantCode string, wantStatus byte) {
		t.Helper()
		_, err := conn.Exec(ctx, sql)
		if code := sqlstate(err); code != wantCode || (wantCode == "" && err != nil) {
			t.Fatalf("%s: got %v, want SQLSTATE %q", sql, err, wantCode)
		}
		if s := pc.TxStatus(); s != wantStatus {
			t.Fatalf("after %s: status %c, want %c", sql, s, wantStatus)
		}
	}
	step("SELECT 1", "", 'I')
	step("BEGIN", "", 'T')
	step("SELECT 1", "", 'T')
	step("SELECT * FROM knn('nope', '[1]', 1)", "42704", 'E')
	step("SELECT 1", codeInFailedSQLTransaction, 'E')
	step("SET vecside.timeout = '1s'", codeInFailedSQLTransaction, 'E')
	step("ROLLBACK", "", 'I')
	step("START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", "", 'T')
	step("DISCARD ALL", codeActiveSQLTransaction, 'E')
	tag, err := pc.Exec(ctx, "COMMIT").ReadAll()
	if err != nil || string(tag[0].CommandTag.String()) != "ROLLBACK" || pc.TxStatus() != 'I' {
		t.Fatalf("COMMIT of a failed block: %v, %v, status %c; want tag ROLLBACK, status I", tag, err, pc.TxStatus())
	}
	// pgx's own transactions.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeParameters(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	pc := connect(t, addr, pgx.QueryExecModeCacheStatement).PgConn()
	ctx := testContext(t)
	cases := []struct {
		sql      string
		declared []uint32
		params   []uint32
		fields   []uint32
	}{
		{"SELECT * FROM knn($1, $2, $3, $4)", nil, []uint32{25, 1021, 23, 25}, nil},
		{"SELECT * FROM knn($1, $2, $3)", []uint32{0, 1022, 20}, []uint32{25, 1022, 20}, nil},
		{"SELECT * FROM knn($1, $2::double precision[], $3::bigint)", nil, []uint32{25, 1022, 20}, nil},
		{"SELECT * FROM knn($1, $2::vector, $3::int)", nil, []uint32{25, 25, 23}, nil},
		{"SELECT * FROM knn('items_uuid', $2, $1)", nil, []uint32{23, 1021}, []uint32{2950, 701}},
		{"SELECT distance, id FROM knn('items_int2', $1, 3)", nil, []uint32{1021}, []uint32{701, 21}},
		{"SELECT * FROM knn('items_uuid', $2, $1, 'with_xid=true')", nil, []uint32{23, 1021}, []uint32{2950, 701, 20}},
		{"SELECT xid, id FROM knn('items_int2', $1, 3, $2)", nil, []uint32{1021, 25}, []uint32{20, 21}},
		{"SELECT * FROM vecside_status()", nil, []uint32{}, []uint32{25, 25, 25, 25, 25, 23, 20, 20, 25, 3220, 25, 20, 25, 25, 20, 3220, 20, 20, 701, 20, 20, 20, 16, 25, 20, 20, 25, 701, 25, 701, 701, 16, 26, 25}},
		{"SET vecside.timeout = '1s'", nil, []uint32{}, nil},
	}
	for i, c := range cases {
		sd, err := pc.Prepare(ctx, "", c.sql, c.declared)
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		var fields []uint32
		for _, f := range sd.Fields {
			fields = append(fields, f.DataTypeOID)
		}
		if !reflect.DeepEqual(sd.ParamOIDs, c.params) || !reflect.DeepEqual(fields, c.fields) {
			t.Errorf("case %d %s: params %v fields %v, want %v %v", i, c.sql, sd.ParamOIDs, fields, c.params, c.fields)
		}
	}
}

func TestResultFormats(t *testing.T) {
	ix, data := newTestIndexer(t)
	_, addr := startServer(t, ix)
	pc := connect(t, addr, pgx.QueryExecModeCacheStatement).PgConn()
	ctx := testContext(t)
	q := []float32{1, 0, 0, 0, 0, 0, 0, 0}
	want := data["items_int8"].bruteForce(q, 1)[0]
	kBinary := binary.BigEndian.AppendUint64(nil, 1)
	params := [][]byte{[]byte("items_int8"), []byte(vectorText(q)), kBinary}
	oids := []uint32{25, 25, 20}
	for _, c := range []struct {
		formats  []int16
		idBinary bool
		dBinary  bool
	}{
		{nil, false, false},
		{[]int16{0}, false, false},
		{[]int16{1}, true, true},
		{[]int16{1, 0}, true, false},
		{[]int16{0, 1}, false, true},
	} {
		res := pc.ExecParams(ctx, "SELECT * FROM knn($1, $2, $3)", params, oids, []int16{1, 0, 1}, c.formats).Read()
		if res.Err != nil || len(res.Rows) != 1 {
			t.Fatalf("formats %v: %v, %d rows", c.formats, res.Err, len(res.Rows))
		}
		id, d := res.Rows[0][0], res.Rows[0][1]
		wantID := []byte(want.id)
		if c.idBinary {
			key, _ := pgvalue.KeyInt8.DecodeText(want.id)
			wantID = []byte(key)
		}
		if string(id) != string(wantID) {
			t.Errorf("formats %v: id %q, want %q", c.formats, id, wantID)
		}
		var dist float64
		if c.dBinary {
			dist = math.Float64frombits(binary.BigEndian.Uint64(d))
		} else {
			dist = parseFloat(t, string(d))
		}
		if abs(dist-want.distance) > 1e-5 {
			t.Errorf("formats %v: distance %v, want %v", c.formats, dist, want.distance)
		}
		if got := res.FieldDescriptions; got[0].Format != max(0, formatAt(c.formats, 0)) || got[1].Format != formatAt(c.formats, 1) {
			t.Errorf("formats %v: RowDescription formats %d %d", c.formats, got[0].Format, got[1].Format)
		}
	}
	// Binary keys of every width, binary pg_lsn and NULL in vecside_status.
	res := pc.ExecParams(ctx, "SELECT applied_lsn, error, dims, rows FROM vecside_status()", nil, nil, nil, []int16{1}).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	row := res.Rows[0]
	if lsn := binary.BigEndian.Uint64(row[0]); lsn != 0x16_B374D848 || row[1] != nil || len(row[2]) != 4 || len(row[3]) != 8 {
		t.Errorf("vecside_status binary: %x %v %x %x", row[0], row[1], row[2], row[3])
	}
	res = pc.ExecParams(ctx, "SELECT applied_lsn FROM vecside_status()", nil, nil, nil, nil).Read()
	if string(res.Rows[0][0]) != "16/B374D848" {
		t.Errorf("pg_lsn text %q", res.Rows[0][0])
	}
	for _, tk := range testKeyTypes {
		res := pc.ExecParams(ctx, "SELECT id FROM knn($1, $2, 1)", [][]byte{[]byte(tk.index), []byte(vectorText(q))}, nil, nil, []int16{1}).Read()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		key, _ := data[tk.index].kt.DecodeText(data[tk.index].bruteForce(q, 1)[0].id)
		wantBin := tk.kt.AppendBinary(nil, key)
		if string(res.Rows[0][0]) != string(wantBin) || int(tk.kt.Size()) != len(wantBin) && tk.kt.Size() > 0 {
			t.Errorf("%s binary id %x, want %x", tk.index, res.Rows[0][0], wantBin)
		}
	}
	// A bad format code is an error, not a crash.
	res = pc.ExecParams(ctx, "SELECT 1", nil, nil, nil, []int16{7}).Read()
	if sqlstate(res.Err) != codeInvalidParameterValue {
		t.Errorf("format code 7: %v", res.Err)
	}
}

func formatAt(f []int16, i int) int16 {
	switch len(f) {
	case 0:
		return 0
	case 1:
		return f[0]
	}
	return f[i]
}

// slowCatalog blocks searches of the index "slow" until the test ends,
// ignoring ctx, to show the server answers at its deadline regardless.
type slowCatalog struct {
	*indexer.Indexer
	entered chan struct{}
	release chan struct{}
}

func (s *slowCatalog) Search(ctx context.Context, name string, q []float32, k int, opts indexer.SearchOptions) (indexer.Result, error) {
	if name == "slow" {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Indexer.Search(ctx, name, q, k, opts)
}

func newSlowCatalog(t *testing.T) *slowCatalog {
	ix, _ := newTestIndexer(t)
	e := addIndex(t, ix, "slow", pgvalue.KeyInt8)
	e.SetReady()
	s := &slowCatalog{ix, make(chan struct{}, 16), make(chan struct{})}
	t.Cleanup(func() { close(s.release) })
	return s
}

func TestTimeout(t *testing.T) {
	cat := newSlowCatalog(t)
	_, addr := startServer(t, cat)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	ctx := testContext(t)
	for _, c := range []struct{ set, options string }{{"SET vecside.timeout = '30ms'", ""}, {"RESET vecside.timeout", "timeout=20ms"}} {
		if _, err := conn.Exec(ctx, c.set); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := conn.Exec(ctx, "SELECT * FROM knn('slow', '[1]', 1, $1)", c.options)
		if sqlstate(err) != codeQueryCanceled || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("%s %s: got %v, want 57014 statement timeout", c.set, c.options, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("answered after %v", d)
		}
		<-cat.entered
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCancelRequest(t *testing.T) {
	cat := newSlowCatalog(t)
	_, addr := startServer(t, cat)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	ctx := testContext(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		<-cat.entered
		if err := conn.PgConn().CancelRequest(ctx); err != nil {
			t.Errorf("CancelRequest: %v", err)
		}
	})
	_, err := conn.Exec(ctx, "SELECT * FROM knn('slow', '[1]', 1)")
	wg.Wait()
	if sqlstate(err) != codeQueryCanceled || !strings.Contains(err.Error(), "user request") {
		t.Fatalf("got %v, want 57014 canceling statement due to user request", err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after cancel: %d, %v", one, err)
	}

	// A wrong key cancels nothing.
	raw := dialRaw(t, addr)
	pkt, _ := (&pgproto3.CancelRequest{ProcessID: conn.PgConn().PID(), SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
	raw.nc.Write(pkt)
	if _, err := raw.nc.Read(make([]byte, 1)); err == nil {
		t.Error("cancel request answered")
	}
}

// TestShutdown: Serve returns when its context ends, and clients are told.
func TestShutdown(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, err := NewServer(Config{Catalog: ix, Auth: "trust"})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Serve(ctx, ln) }()
	conn := connect(t, ln.Addr().String(), pgx.QueryExecModeCacheStatement)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := conn.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("connection survived shutdown")
	}
}

func TestNewServerConfig(t *testing.T) {
	ix := indexer.New()
	for _, cfg := range []Config{
		{Catalog: ix},
		{Catalog: ix, Auth: "md5"},
		{Catalog: ix, Auth: "trust", Limits: Limits{MaxConnections: -1}},
		{Auth: "trust"},
	} {
		if _, err := NewServer(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestMaxConnections(t *testing.T) {
	ix, _ := newTestIndexer(t)
	srv, err := NewServer(Config{Catalog: ix, Auth: "trust", Limits: Limits{MaxConnections: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	defer func() { cancel(); <-done }()
	connect(t, ln.Addr().String(), pgx.QueryExecModeCacheStatement)
	_, err = pgconn.Connect(testContext(t), connString(ln.Addr().String()))
	if sqlstate(err) != codeTooManyConnections {
		t.Fatalf("second connection: %v, want 53300", err)
	}
}

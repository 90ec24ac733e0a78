package deploy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/internal/testcert"
	"github.com/vecside/vecside/rpc"
)

const (
	sidecarUser     = "sql_helper"
	sidecarPassword = "it's a \\ secret"
)

// startRPC serves a catalog of one ready index, "pts", of n 2-d points
// (i, 0) keyed by i, with SCRAM-SHA-256 for sidecarUser and TLS on
// offer. It returns the address.
func startRPC(t *testing.T, n int, cert testcert.Cert) string {
	t.Helper()
	ix := indexer.New()
	spec, err := indexer.ParseSpec("pts=public.pts(v) key=id metric=l2")
	if err != nil {
		t.Fatal(err)
	}
	e, err := ix.Add(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Configure(pgvalue.KeyInt8, pgvalue.VectorFloat4Array, 2); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		key, _ := pgvalue.KeyInt8.DecodeText(strconv.Itoa(i))
		e.Stream().Upsert(key, []float32{float32(i), 0})
	}
	e.SetReady()
	v, err := rpc.NewVerifier(sidecarPassword, rpc.DefaultScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	users, err := rpc.ParseUsers(strings.NewReader(rpc.UserLine(sidecarUser, v)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpc.NewServer(rpc.Config{Catalog: ix, Users: users, TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// detailed adds a PostgreSQL error's DETAIL to its message: dblink puts
// the remote server's error there.
func detailed(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w: %s", err, pe.Detail)
	}
	return err
}

// libpqString is a libpq key=value string with each value quoted.
func libpqString(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		v := strings.ReplaceAll(strings.ReplaceAll(kv[i+1], `\`, `\\`), `'`, `\'`)
		fmt.Fprintf(&b, "%s='%s' ", kv[i], v)
	}
	return b.String()
}

// TestDblinkSCRAM: dblink, inside PostgreSQL, logs in to the sidecar with
// SCRAM-SHA-256, with and without TLS (verified, with channel binding),
// and gets knn's rows; a wrong password is refused.
func TestDblinkSCRAM(t *testing.T) {
	ctx := context.Background()
	cert := testcert.New(t)
	addr := startRPC(t, 50, cert)
	host, port, _ := net.SplitHostPort(addr)
	db, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, "CREATE EXTENSION dblink"); err != nil {
		t.Fatal(err)
	}
	query := "SELECT * FROM knn('pts', '[10.2,0]', 3)"
	for _, ssl := range [][]string{
		{"sslmode", "disable"},
		{"sslmode", "require"},
		{"sslmode", "verify-full", "sslrootcert", cert.CertFile, "channel_binding", "require"},
	} {
		conninfo := libpqString(append([]string{"host", host, "port", port, "user", sidecarUser, "password", sidecarPassword, "dbname", "x"}, ssl...)...)
		var ids []int64
		rows, err := db.Query(ctx, "SELECT id FROM dblink($1, $2) AS t(id bigint, distance float8)", conninfo, query)
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err != nil || fmt.Sprint(ids) != "[10 11 9]" {
			t.Errorf("%v: %v, %v; want [10 11 9]", ssl, ids, detailed(err))
		}
		wrong := libpqString(append([]string{"host", host, "port", port, "user", sidecarUser, "password", "wrong", "dbname", "x"}, ssl...)...)
		_, err = db.Exec(ctx, "SELECT * FROM dblink($1, $2) AS t(id bigint, distance float8)", wrong, query)
		if err := detailed(err); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
			t.Errorf("%v, a wrong password: %v", ssl, err)
		}
	}
}

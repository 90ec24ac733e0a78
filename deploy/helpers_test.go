package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/rpc"
)

// helperEnv is a database with a table of vectors, a sidecar that
// follows it with SCRAM logins, and the helpers installed.
type helperEnv struct {
	t      *testing.T
	dsn    string
	db     *pgx.Conn // as the superuser
	sc     *sidecar.Sidecar
	addr   string
	users  *rpc.Users
	prefix string // of the roles this test made
}

const (
	helperRows = 3000
	helperDims = 8
	helperSpec = "items_v=public.items(v) key=id metric=l2 kind=flat"
)

func newHelperEnv(t *testing.T) *helperEnv {
	ctx := context.Background()
	e := &helperEnv{t: t, dsn: pgtest.Shared(t).NewDatabase(t), prefix: fmt.Sprintf("h%d_", time.Now().UnixNano()%1e6)}
	var err error
	if e.db, err = pgx.Connect(ctx, e.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close(ctx) })
	e.exec(`SELECT setseed(0.25);
		CREATE TABLE items (id bigint PRIMARY KEY, v real[], note text);
		INSERT INTO items SELECT i, ARRAY(SELECT (random() * 2 - 1)::real FROM generate_series(1, 8) WHERE i > 0), 'row ' || i
		FROM generate_series(1, 3000) i`)
	v, err := rpc.NewVerifier(sidecarPassword, rpc.DefaultScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	if e.users, err = rpc.ParseUsers(strings.NewReader(rpc.UserLine(sidecarUser, v))); err != nil {
		t.Fatal(err)
	}
	e.startSidecar("127.0.0.1:0")
	side, err := pgx.Connect(ctx, dsnWithUser(fmt.Sprintf("postgres://%s/x?sslmode=disable", e.addr), sidecarUser, sidecarPassword))
	if err != nil {
		t.Fatal(err)
	}
	indexes, err := SidecarIndexes(ctx, side)
	side.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(e.addr)
	p, _ := strconv.Atoi(port)
	if err := Install(ctx, e.db, Sidecar{Host: host, Port: p, User: sidecarUser, Password: sidecarPassword, SSLMode: "disable"}, indexes); err != nil {
		t.Fatal(err)
	}
	return e
}

// startSidecar starts a sidecar on listen and waits until its index is
// ready.
func (e *helperEnv) startSidecar(listen string) {
	ctx := context.Background()
	sc, err := sidecar.Start(ctx, sidecar.Config{Source: e.dsn, Name: "vecside", Listen: listen, Auth: rpc.AuthSCRAM, Users: e.users,
		Indexes: []string{helperSpec}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	e.sc, e.addr = sc, sc.Addr.String()
	e.t.Cleanup(func() { sc.Stop() })
	entry, _ := sc.Indexer.Get("items_v")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if state, msg := entry.State(); state == indexer.StateReady {
			return
		} else if state == indexer.StateError || time.Now().After(deadline) {
			e.t.Fatalf("index %s: %s", state, msg)
		}
	}
}

func (e *helperEnv) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.db.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// role makes a login role granted what grants says (%s is its name), and
// returns a connection as it.
func (e *helperEnv) role(name string, grants ...string) *pgx.Conn {
	e.t.Helper()
	name = e.prefix + name
	e.exec(fmt.Sprintf("CREATE ROLE %s LOGIN", name))
	e.t.Cleanup(func() {
		ctx := context.Background()
		if db, err := pgx.Connect(ctx, e.dsn); err == nil {
			db.Exec(ctx, fmt.Sprintf("DROP OWNED BY %s; DROP ROLE %s", name, name), pgx.QueryExecModeSimpleProtocol)
			db.Close(ctx)
		}
	})
	for _, g := range grants {
		e.exec(fmt.Sprintf(g, name))
	}
	conn, err := pgx.Connect(context.Background(), dsnWithUser(e.dsn, name, ""))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func dsnWithUser(dsn, user, password string) string {
	cfg, _ := pgconn.ParseConfig(dsn)
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	if password == "" {
		u.User = url.User(user)
	}
	return u.String()
}

type scored struct {
	id       int64
	distance float64
}

func collect(t *testing.T, conn *pgx.Conn, sql string, args ...any) ([]scored, error) {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (scored, error) {
		var s scored
		err := r.Scan(&s.id, &s.distance)
		return s, err
	})
}

const (
	searchSQL = "SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint)"
	exactSQL  = "SELECT id, vecside.l2_distance(v, $1) AS d FROM items WHERE v IS NOT NULL ORDER BY d, id LIMIT 10"
)

// checkExact compares vecside.search with exact SQL, both as conn's role.
func checkExact(t *testing.T, conn *pgx.Conn, q []float32) []scored {
	t.Helper()
	got, err := collect(t, conn, searchSQL, q)
	if err != nil {
		t.Fatalf("vecside.search: %v", err)
	}
	want, err := collect(t, conn, exactSQL, q)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || len(got) != 10 {
		t.Fatalf("vecside.search:\n got %v\nwant %v", got, want)
	}
	return got
}

func sqlstateOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func randomQuery(rng *rand.Rand) []float32 {
	q := make([]float32, helperDims)
	for i := range q {
		q[i] = rng.Float32()*2 - 1
	}
	return q
}

// TestSQLHelpers: the acceptance of the SQL helpers against a real
// PostgreSQL and a running sidecar.
func TestSQLHelpers(t *testing.T) {
	e := newHelperEnv(t)
	rng := rand.New(rand.NewPCG(3, 4))
	reader := e.role("reader", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")

	t.Run("exact top-10 for a role without superuser", func(t *testing.T) {
		for range 5 {
			q := randomQuery(rng)
			got := checkExact(t, reader, q)
			rows, err := collect(t, reader, "SELECT (r.item).id, r.distance FROM vecside.search_rows('items_v', $1, 10, NULL::items) r", q)
			if err != nil || !slices.Equal(rows, got) {
				t.Fatalf("search_rows: %v, %v; want %v", rows, err, got)
			}
		}
		for _, sql := range []string{
			"SELECT * FROM vecside.search('items_v', $1, 10, NULL::integer)",
			"SELECT * FROM vecside.search_rows('items_v', $1, 10, NULL::bigint)",
			"SELECT * FROM vecside.candidates('items_v', $1, 10, NULL::text)",
		} {
			if _, err := reader.Exec(context.Background(), sql, randomQuery(rng)); sqlstateOf(err) != "42804" {
				t.Errorf("%s: %v, want 42804", sql, err)
			}
		}
	})

	t.Run("no SELECT, no candidates", func(t *testing.T) {
		outsider := e.role("outsider", "GRANT vecside_user TO %s")
		q := randomQuery(rng)
		for _, sql := range []string{searchSQL, "SELECT * FROM vecside.candidates('items_v', $1, 10, NULL::bigint)"} {
			if _, err := collect(t, outsider, sql, q); sqlstateOf(err) != "42501" {
				t.Errorf("%s: %v, want 42501", sql, err)
			}
		}
		// dblink itself is closed to it, so it cannot reuse the named
		// connection either.
		if _, err := outsider.Exec(context.Background(), "SELECT dblink_get_connections()"); sqlstateOf(err) != "42501" {
			t.Errorf("dblink_get_connections: %v, want 42501", err)
		}
		stranger := e.role("stranger", "GRANT SELECT ON items TO %s")
		if _, err := collect(t, stranger, searchSQL, q); sqlstateOf(err) != "42501" {
			t.Errorf("a role without vecside_user: %v, want 42501", err)
		}
	})

	t.Run("nothing is granted to PUBLIC", func(t *testing.T) {
		nobody := e.prefix + "nobody"
		e.exec("CREATE ROLE " + nobody)
		defer e.exec("DROP ROLE " + nobody)
		var open []string
		rows, _ := e.db.Query(context.Background(), `
			SELECT p.oid::regprocedure::text FROM pg_proc p
			WHERE (p.pronamespace = 'vecside'::regnamespace OR p.oid IN (
				SELECT objid FROM pg_depend WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dblink') AND classid = 'pg_proc'::regclass))
			  AND has_function_privilege($1, p.oid, 'EXECUTE')
			UNION ALL SELECT 'schema vecside' WHERE has_schema_privilege($1, 'vecside', 'USAGE')
			UNION ALL SELECT 'vecside.indexes' WHERE has_table_privilege($1, 'vecside.indexes', 'SELECT')
			UNION ALL SELECT 'server' WHERE has_server_privilege($1, 'vecside_sidecar', 'USAGE')`, nobody)
		open, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(open) > 0 {
			t.Errorf("PUBLIC may use %v (%v)", open, err)
		}
	})

	t.Run("statement_timeout bounds the sidecar", func(t *testing.T) {
		ctx := context.Background()
		conn := e.role("timed", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")
		if _, err := conn.Exec(ctx, "SET statement_timeout = '300ms'"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := collect(t, conn, "SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint, 'min_lsn=FFFFFFFF/0')", randomQuery(rng))
		if took := time.Since(start); err == nil || took > 3*time.Second {
			t.Fatalf("waiting for an LSN that never comes: %v after %v, want an error within the statement timeout", err, took)
		}
		if code := sqlstateOf(err); code != "55000" && code != "57014" {
			t.Errorf("got %v, want 55000 or 57014", err)
		}
		if _, err := collect(t, conn, "SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint, 'timeout=1h')", randomQuery(rng)); sqlstateOf(err) != "22023" {
			t.Errorf("timeout= in the options: %v, want 22023", err)
		}
	})

	t.Run("a cancel ends a wait for an LSN", func(t *testing.T) {
		ctx := context.Background()
		conn := e.role("waiting", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")
		if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
			t.Fatal(err)
		}
		pid := conn.PgConn().PID()
		done := make(chan error, 1)
		go func() {
			_, err := collect(t, conn, "SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint, 'min_lsn=FFFFFFFF/0')", randomQuery(rng))
			done <- err
		}()
		time.Sleep(700 * time.Millisecond) // well into the wait
		if _, err := e.db.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		cancelled := time.Now()
		select {
		case err := <-done:
			if sqlstateOf(err) != "57014" {
				t.Errorf("after pg_cancel_backend: %v, want 57014", err)
			}
			t.Logf("the wait ended %v after pg_cancel_backend", time.Since(cancelled))
		case <-time.After(5 * time.Second):
			t.Fatal("pg_cancel_backend did not end a helper's wait for an LSN within 5 s (dblink cannot be interrupted: the wait must come in slices)")
		}
	})

	t.Run("a wrong dimension's error does not print the vector", func(t *testing.T) {
		q := make([]float32, 3*helperDims)
		for i := range q {
			q[i] = 0.123456
		}
		_, err := collect(t, reader, "SELECT id, distance FROM vecside.search('items_v', $1, 10, NULL::bigint)", q)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
			t.Fatalf("a query of %d dimensions: %v, want 22023", len(q), err)
		}
		all := pgErr.Message + pgErr.Detail + pgErr.Hint + pgErr.Where
		if strings.Contains(all, "0.123456") || strings.Contains(all, "\\x") || len(all) > 2000 {
			t.Errorf("the error prints the query vector (%d bytes): %q", len(all), all)
		}
		t.Logf("%s (%s)", pgErr.Message, pgErr.Where)
	})

	t.Run("SQL injection", func(t *testing.T) {
		q := randomQuery(rng)
		for _, conn := range []*pgx.Conn{reader, e.db} {
			for _, c := range []struct{ index, options, code string }{
				{"items_v'); DROP TABLE items; --", "", "42704"},
				{`items_v\'); DROP TABLE items; --`, "", "42704"},
				{"x' OR '1'='1", "", "42704"},
				{"items_v", "oversample=1'); DROP TABLE items; --", "22023"},
				{"items_v", `oversample=1\'); DROP TABLE items; --`, "22023"},
				{"items_v", `probes=\x`, "22023"},
			} {
				_, err := collect(t, conn, "SELECT id, distance FROM vecside.search($1, $2, 10, NULL::bigint, $3)", c.index, q, c.options)
				if sqlstateOf(err) != c.code {
					t.Errorf("index %q, options %q: %v, want %s", c.index, c.options, err, c.code)
				}
			}
		}
		var n int
		if err := e.db.QueryRow(context.Background(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != helperRows {
			t.Fatalf("items after the attempts: %d rows, %v", n, err)
		}
		checkExact(t, reader, q)
	})

	t.Run("sidecar restarts mid-session", func(t *testing.T) {
		q := randomQuery(rng)
		before := checkExact(t, reader, q)
		addr := e.addr
		if err := e.sc.Stop(); err != nil {
			t.Fatal(err)
		}
		e.startSidecar(addr)
		if after := checkExact(t, reader, q); !slices.Equal(after, before) {
			t.Fatalf("after the restart: %v, want %v", after, before)
		}
	})

	t.Run("row-level security", func(t *testing.T) {
		rls := e.role("rls", "GRANT vecside_user TO %s", "GRANT SELECT ON items TO %s")
		e.exec(fmt.Sprintf(`ALTER TABLE items ENABLE ROW LEVEL SECURITY;
			CREATE POLICY even ON items FOR SELECT TO %[1]s USING (id %% 2 = 0);
			CREATE POLICY everything ON items FOR SELECT TO %[2]s USING (true)`, e.prefix+"rls", e.prefix+"reader"))
		q := randomQuery(rng)
		_, err := collect(t, rls, searchSQL, q)
		if sqlstateOf(err) != "42501" || !strings.Contains(err.Error(), "not opted in") {
			t.Fatalf("an index not opted in: %v, want 42501", err)
		}
		e.exec("UPDATE vecside.indexes SET allow_rls = true WHERE name = 'items_v'")
		got := checkExact(t, rls, q)
		for _, s := range got {
			if s.id%2 != 0 {
				t.Fatalf("row %d is hidden from the role, and was returned: %v", s.id, got)
			}
		}
		checkExact(t, reader, q)
	})
}

// TestInstallScript: what vecside sql print writes installs the helpers
// when run as it is, and uninstalling removes them.
func TestInstallScript(t *testing.T) {
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, "CREATE TABLE docs (id uuid PRIMARY KEY, e double precision[])"); err != nil {
		t.Fatal(err)
	}
	script := InstallScript(Sidecar{Host: "10.0.0.1", Port: 6433, User: "o'neil", Password: `p\a'ss`},
		[]Index{{Name: "docs_e", Table: "public.docs", KeyColumn: "id", VectorColumn: "e", Metric: "cosine"}})
	if _, err := db.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	var kt, options string
	if err := db.QueryRow(ctx, "SELECT key_type::text FROM vecside.indexes WHERE name = 'docs_e'").Scan(&kt); err != nil || kt != "uuid" {
		t.Errorf("registered key type %q, %v", kt, err)
	}
	if err := db.QueryRow(ctx, "SELECT array_to_string(umoptions, ' ') FROM pg_user_mappings WHERE srvname = 'vecside_sidecar'").Scan(&options); err != nil || options != `user=o'neil password=p\a'ss` {
		t.Errorf("user mapping %q, %v", options, err)
	}
	if err := Uninstall(ctx, db); err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = 'vecside'").Scan(&n)
	if n != 0 {
		t.Error("schema vecside is still there")
	}
}

package rpc

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		sql  string
		want string // canonical form of each statement, joined by "; "; or "ERR <SQLSTATE>"
	}{
		{"select * from KNN('a', '[1,2]', 10);", "SELECT * FROM knn('a', '[1,2]', 10)"},
		{"SELECT id,distance FROM knn($1,$2::REAL[],$3::int4,'probes=2')", "SELECT id, distance FROM knn($1, $2::real[], $3::integer, 'probes=2')"},
		{"SELECT * FROM knn( 'it''s' , '{1}' , -5 )", "SELECT * FROM knn('it''s', '{1}', -5)"},
		{"SELECT * FROM knn($1, $2::double precision[], $3::vector(3))", "SELECT * FROM knn($1, $2::double precision[], $3::vector)"},
		{`SELECT "from", "Id" FROM vecside_status()`, `SELECT "from", "Id" FROM vecside_status()`},
		{"SELECT 007", "SELECT 7"},
		{"select VERSION ( )", "SELECT version()"},
		{"SET vecside.timeout TO 500ms", "SET vecside.timeout = '500ms'"},
		{"set session DateStyle = ISO, MDY", "SET datestyle = 'iso, mdy'"},
		{"SET vecside.oversample = DEFAULT", "RESET vecside.oversample"},
		{`SET "All".x = -1`, `SET "All.x" = '-1'`},
		{"SHOW vecside.timeout; RESET ALL; reset vecside.timeout", "SHOW vecside.timeout; RESET ALL; RESET vecside.timeout"},
		{"BEGIN WORK; START TRANSACTION READ ONLY; end; ABORT", "BEGIN; START TRANSACTION; COMMIT; ROLLBACK"},
		{"DISCARD ALL; DEALLOCATE PREPARE stmt_1; DEALLOCATE ALL; deallocate \"all\"", `DISCARD ALL; DEALLOCATE stmt_1; DEALLOCATE ALL; DEALLOCATE "all"`},
		{"-- only a comment", ""},
		{";;", ""},
		{"SELECT 1 -- trailing\n; /* c */ SELECT 2", "SELECT 1; SELECT 2"},
		{"SELECT", "ERR 42601"},
		{"SELECT * FROM knn('a', 'b')", "ERR 42883"},
		{"SELECT * FROM other()", "ERR 42883"},
		{"SELECT * FROM t", "ERR 0A000"},
		{"UPDATE t SET x = 1", "ERR 0A000"},
		{"SET LOCAL vecside.timeout = 1", "ERR 0A000"},
		{"SELECT * FROM knn($0, 'a', 1)", "ERR 42601"},
		{"SELECT * FROM knn($1, $2::money, 1)", "ERR 42601"},
		{"SELECT 'open", "ERR 42601"},
		{"/* open", "ERR 42601"},
		{`SET "" = 1`, "ERR 42601"},
		{"SELECT 1 2", "ERR 42601"},
		{"SELECT 99999999999999999999", "ERR 0A000"},
		{"BEGIN ISOLATION LEVEL nonsense", "ERR 42601"},
		{"select ?", "ERR 42601"},
		{"select * from vecside_status() where state = 'ready' and rows >= -1 and error is null and rebuilding = TRUE and kind is not null order by rows desc, index_name asc limit 3 offset 1",
			"SELECT * FROM vecside_status() WHERE state = 'ready' AND rows >= -1 AND error IS NULL AND rebuilding = true AND kind IS NOT NULL ORDER BY rows DESC, index_name LIMIT 3 OFFSET 1"},
		{"SELECT id FROM knn('a', '[1]', 5) WHERE distance != 1.5 AND id<>3 LIMIT ALL", "SELECT id FROM knn('a', '[1]', 5) WHERE distance <> 1.5 AND id <> 3"},
		{`SELECT "limit" FROM vecside_status() ORDER BY "order"`, `SELECT "limit" FROM vecside_status() ORDER BY "order"`},
		{"SELECT 1 WHERE x = 1", "ERR 42601"},
		{"SELECT * FROM vecside_status() WHERE x ! 1", "ERR 42601"},
		{"SELECT * FROM vecside_status() WHERE x = y", "ERR 42601"},
		{"SELECT * FROM vecside_status() LIMIT 99999999999999999999", "ERR 22023"},
		{"SELECT * FROM vecside_status() ORDER BY", "ERR 42601"},
		{`SELECT * FROM knn(E'it\'s', E'[1,\x32,\063]', 1)`, `SELECT * FROM knn('it''s', '[1,2,3]', 1)`},
		{`SELECT * FROM knn(e'\\n\u00fc''\U0001F600\q', '[1]', 1)`, `SELECT * FROM knn('\nü''😀q', '[1]', 1)`},
		{`SELECT * FROM knn(E'\b\f\r\t\x', '[1]', 1)`, "SELECT * FROM knn('\b\f\r\tx', '[1]', 1)"},
		{`SELECT * FROM knn(E'\000', '[1]', 1)`, "ERR 22021"},
		{`SELECT * FROM knn(E'\xff', '[1]', 1)`, "ERR 22021"},
		{`SELECT * FROM knn(E'\u12', '[1]', 1)`, "ERR 42601"},
		{`SELECT * FROM knn(E'\UFFFFFFFF', '[1]', 1)`, "ERR 42601"},
		{`SELECT * FROM knn(E'open\', '[1]', 1)`, "ERR 42601"},
		{"select ARRAY_AGG ( id ), array_agg(\"xid\") from knn($1, $2, $3) where distance < 2 limit 1",
			"SELECT array_agg(id), array_agg(xid) FROM knn($1, $2, $3) WHERE distance < 2 LIMIT 1"},
		{`SELECT "array_agg" FROM vecside_status()`, `SELECT array_agg FROM vecside_status()`},
		{"SELECT array_agg(id), distance FROM knn('a', '[1]', 1)", "ERR 42803"},
		{"SELECT id, array_agg(distance) FROM knn('a', '[1]', 1)", "ERR 42803"},
		{"SELECT array_agg(id) FROM knn('a', '[1]', 1) ORDER BY distance", "ERR 42803"},
		{"SELECT array_agg(*) FROM knn('a', '[1]', 1)", "ERR 42601"},
		{"SELECT array_agg(id FROM knn('a', '[1]', 1)", "ERR 42601"},
	}
	for _, c := range cases {
		stmts, err := parseQuery(c.sql, DefaultLimits.MaxQueryStatements)
		var got string
		if err != nil {
			got = "ERR " + toPgError(err).code
		} else {
			for i, s := range stmts {
				if i > 0 {
					got += "; "
				}
				got += s.String()
			}
		}
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestParseOne(t *testing.T) {
	if s, err := parseOne(" -- nothing"); err != nil || s.kind != stmtEmpty {
		t.Errorf("empty: %v %v", s, err)
	}
	if _, err := parseOne("SELECT 1; SELECT 2"); err == nil {
		t.Error("two statements in a prepared statement")
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, err := parseQuery("SELECT ü FROM knn('a','b',1) junk", 1)
	if pe := toPgError(err); pe.position != 30 || pe.msg != `syntax error at or near "junk"` {
		t.Errorf("got %q at %d, want junk at 30", pe.msg, pe.position)
	}
}

// checkReparse asserts that every statement sql parses to renders as SQL
// that parses back to the same statement.
func checkReparse(t *testing.T, sql string) {
	stmts, err := parseQuery(sql, DefaultLimits.MaxQueryStatements)
	if err != nil {
		if toPgError(err).code == codeInternalError {
			t.Fatalf("%q: unmapped error %v", sql, err)
		}
		return
	}
	for _, s := range stmts {
		again, err := parseOne(s.String())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("%q: %#v renders as %q, which parses to %#v, %v", sql, s, s.String(), again, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Fuzz(checkReparse)
}

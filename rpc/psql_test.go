package rpc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPsql checks that psql, which speaks the simple protocol through
// libpq, gets the rows pgx gets, as text.
func TestPsql(t *testing.T) {
	ix, _ := newTestIndexer(t)
	_, addr := startServer(t, ix)
	host, port, _ := net.SplitHostPort(addr)
	conn := connect(t, addr, pgx.QueryExecModeCacheStatement)
	q := []float32{0.5, 0.25, -1, 0, 0.125, 3, -2, 1}
	ran := false
	for _, psql := range []string{"/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql"} {
		if _, err := os.Stat(psql); err != nil {
			continue
		}
		ran = true
		for _, tk := range testKeyTypes {
			sql := fmt.Sprintf("SELECT * FROM knn('%s', '%s', 5)", tk.index, vectorText(q))
			var want strings.Builder
			for _, h := range queryHits(t, conn, sql) {
				fmt.Fprintf(&want, "%s,%s\n", h.id, appendFloat8(nil, h.distance))
			}
			cmd := exec.Command(psql, "-X", "-A", "-t", "-F,", "-v", "ON_ERROR_STOP=1",
				"-h", host, "-p", port, "-U", "tester", "-d", "db", "-c", sql)
			cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=5", "PGSSLMODE=prefer")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", psql, err, out)
			}
			if string(out) != want.String() {
				t.Errorf("%s %s:\n got %q\nwant %q", psql, tk.index, out, want.String())
			}
		}
	}
	if !ran {
		t.Fatal("psql is not installed: install postgresql-client-15 (scripts/install-postgres does)")
	}
}

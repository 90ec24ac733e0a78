package readme_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/readme"
	"github.com/vecside/vecside/internal/vecsidebin"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// password stands for every '...' of the README: the sidecar role's, and
// the password given to vecside passwd.
const password = "secret"

// TestWalkthrough runs README.md's named blocks in order, as a new user
// types them, against a throwaway cluster whose table items(id,
// embedding) belongs to the application's role app: the demo, go
// install, the least-privilege role, a CA and certificate made with
// openssl, check, passwd, serve with TLS, knn from psql with verify-full,
// search and status, read-your-writes, and the SQL helpers. A command
// that no longer works fails the test, with its output.
//
// What the README leaves to the reader: /etc/vecside and /var/lib/vecside
// become directories of the test, the sidecar's host sidecar.internal is
// localhost and its port 6433 a free one, '...' is the password, and
// query vectors are three-dimensional. $DSN (the sidecar's role),
// $APP_DSN and $SUPERUSER_DSN are in the environment, as is
// VECSIDE_METRICS_LISTEN, a free port the test asks /readyz on.
func TestWalkthrough(t *testing.T) {
	ctx := context.Background()
	cluster := pgtest.Shared(t)
	su := pgtest.Connect(t, cluster.DSN("postgres"))
	t.Cleanup(func() {
		// After the database: roles are the cluster's.
		su.Exec(ctx, "DROP ROLE IF EXISTS vecside, app, vecside_user, vecside_owner")
	})
	dir, superuser, port, metrics := t.TempDir(), cluster.NewDatabase(t), pgtest.FreePort(t), pgtest.FreePort(t)
	// The CA file is read by the database server too (the helpers'
	// verify-full), which runs as another user when the test is root.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := pgtest.Connect(t, superuser)
	if _, err := db.Exec(ctx, `CREATE ROLE app LOGIN PASSWORD 'app-db';
		CREATE TABLE items (id bigint PRIMARY KEY, embedding real[], title text);
		INSERT INTO items SELECT i, ARRAY[sin(i), cos(i), i % 7], 'item ' || i FROM generate_series(1, 1000) i;
		ALTER TABLE items OWNER TO app`); err != nil {
		t.Fatal(err)
	}
	// The demo runs the binary scripts/test built; the install block's
	// go install puts another in GOBIN, first on PATH, for the blocks
	// after it.
	bin, prebuilt := filepath.Join(dir, "bin"), filepath.Join(dir, "prebuilt")
	if err := os.Mkdir(prebuilt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(vecsidebin.Path(t), filepath.Join(prebuilt, "vecside")); err != nil {
		t.Fatal(err)
	}
	as := func(role string) string {
		return strings.Replace(superuser, "postgres://postgres@", "postgres://"+role+"@", 1)
	}
	// The row the read-your-writes block inserts is the nearest to the
	// README's query vector, found by the sidecar at once and by the
	// helpers after it.
	inserted := regexp.MustCompile(`-\n +1000001 \| +0\n`)
	w := &readme.Walk{
		Dir: "../..",
		Env: append(os.Environ(), "GOBIN="+bin, readme.Path(bin, prebuilt),
			"DSN="+as("vecside:"+password), "APP_DSN="+as("app:app-db"), "SUPERUSER_DSN="+superuser,
			fmt.Sprintf("VECSIDE_METRICS_LISTEN=127.0.0.1:%d", metrics)),
		Replace: []*readme.Replacement{
			{Old: "/etc/vecside", New: dir + "/etc"},
			{Old: "/var/lib/vecside", New: dir + "/data"},
			{Old: "sidecar.internal", New: "localhost"},
			{Old: "6433", New: fmt.Sprint(port)},
			{Old: "'...'", New: "'" + password + "'"},
			// The binary scripts/test built, not a second build of it.
			{Old: "go run ./cmd/vecside", New: "vecside"},
			// '[0.1,0.2,...]', '[...]', '{0.1,...}': knn takes both
			// literals, the test's real[] column the second.
			{Old: "query vectors", Pattern: regexp.MustCompile(`'[\[{][0-9.,]*\.\.\.[\]}]'`), New: "'{0.1,0.2,0.3}'"},
		},
		SQL: map[string]string{
			// As a superuser in the table's database.
			"role-setup": superuser,
			// psql logged in to the sidecar as app over TLS, checking
			// its name against the CA, with the password psql asks for.
			"knn": fmt.Sprintf("host=localhost port=%d user=app password=%s sslmode=verify-full sslrootcert=%s/etc/ca.crt", port, password, dir),
		},
		Want: map[string]*regexp.Regexp{
			"quickstart":       regexp.MustCompile(`recall@10 = 1\.00.*\n(?s:.*)done; removing the throwaway database`),
			"serve":            regexp.MustCompile(`(?m)^ok +index items_embedding`),
			"knn":              regexp.MustCompile(`\(10 rows\)`),
			"search":           regexp.MustCompile(`(?m)^items_embedding +public\.items\(embedding\) +flat +ready +1000 `),
			"read-your-writes": inserted,
			"sql-helpers":      inserted,
		},
		Stdin: password + "\n",
		Ready: fmt.Sprintf("http://127.0.0.1:%d/readyz", metrics),
		Logs:  filepath.Join(dir, "serve.log"),
	}
	w.Run(t, "../../README.md")
	if _, err := os.Stat(w.Logs); err != nil {
		t.Errorf("no block of README.md runs vecside serve: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bin, "vecside")); err != nil {
		t.Errorf("no block of README.md installs vecside: %v", err)
	}
}

package main

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

// TestExample runs README.md's blocks as a reader types them, against a
// throwaway cluster: the role and database, then from the repository's
// root setup as that role (a replication role, not a superuser),
// vecside passwd, a sidecar with the example's --name and --index
// logging clients in with SCRAM, and a search whose rows all belong to
// the tenant, nearest first, and which finds the document inserted just
// before it. The README's host and ports become the cluster's and free
// ones, its files the test's.
func TestExample(t *testing.T) {
	ctx := context.Background()
	cluster := pgtest.Shared(t)
	su := pgtest.Connect(t, cluster.DSN("postgres"))
	t.Cleanup(func() {
		su.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = 'sem' AND NOT active")
		su.Exec(ctx, "DROP DATABASE IF EXISTS sem WITH (FORCE)")
		su.Exec(ctx, "DROP ROLE IF EXISTS semsearch")
	})
	run := readme.Named(t, "README.md", "sh", "semsearch-run")
	if strings.Contains(run, "--auth trust") {
		t.Error("the serve line lets clients in without a password")
	}
	dir, metrics := t.TempDir(), pgtest.FreePort(t)
	prebuilt := filepath.Join(dir, "bin")
	if err := os.Mkdir(prebuilt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(vecsidebin.Path(t), filepath.Join(prebuilt, "vecside")); err != nil {
		t.Fatal(err)
	}
	w := &readme.Walk{
		Dir: "../..",
		Env: append(os.Environ(), readme.Path(prebuilt)),
		Replace: []*readme.Replacement{
			{Old: "localhost:5432", New: fmt.Sprintf("127.0.0.1:%d", cluster.Port)},
			{Old: "6434", New: fmt.Sprint(pgtest.FreePort(t))},
			{Old: "9434", New: fmt.Sprint(metrics)},
			{Old: "./semsearch.data", New: filepath.Join(dir, "data")},
			{Old: "semsearch.users", New: filepath.Join(dir, "users")},
			// The binary scripts/test built, not a second build of it.
			{Old: "go run ./cmd/vecside", New: "vecside"},
		},
		SQL: map[string]string{"semsearch-setup": cluster.DSN("postgres")},
		Want: map[string]*regexp.Regexp{
			"semsearch-run": regexp.MustCompile(`nearest documents of tenant 1:\n +[0-9.]+ +1 +growing tomatoes in a small garden\n(?s:.*)` +
				`after inserting document 11:\n +[0-9.]+ +11 +notes on garden tomatoes\n`),
		},
		Ready: fmt.Sprintf("http://127.0.0.1:%d/readyz", metrics),
		Logs:  filepath.Join(dir, "serve.log"),
	}
	out := w.Run(t, "README.md")
	if strings.Contains(out["semsearch-run"], "greenhouse") {
		t.Errorf("tenant 1's search found tenant 2's document:\n%s", out["semsearch-run"])
	}
	var super bool
	if err := su.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = 'semsearch'").Scan(&super); err != nil || super {
		t.Errorf("the example's role: superuser %v (%v)", super, err)
	}
}

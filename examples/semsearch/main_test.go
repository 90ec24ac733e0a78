package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/readme"
	"github.com/vecside/vecside/internal/sidecar"
	"github.com/vecside/vecside/rpc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// match is the first submatch of pattern in s.
func match(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("README.md: no %s in\n%s", pattern, s)
	}
	return m[1]
}

// TestExample runs the example as README.md says, against a real
// Postgres and sidecar: its role and database, setup as that role (a
// replication role, not a superuser), a sidecar with that --name and
// --index logging clients in with SCRAM, then a search whose rows all
// belong to the tenant, nearest first, and which finds the document
// inserted just before it.
func TestExample(t *testing.T) {
	ctx := context.Background()
	cluster := pgtest.Shared(t)
	su := pgtest.Connect(t, cluster.DSN("postgres"))
	// One statement at a time, as psql sends them: CREATE DATABASE
	// cannot run in the transaction of a multi-statement query.
	for _, stmt := range strings.SplitAfter(readme.Named(t, "README.md", "sql", "semsearch-setup"), ";") {
		if _, err := su.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	script := readme.Named(t, "README.md", "sh", "semsearch-run")
	source, err := url.Parse(match(t, script, `export DSN='([^']+)'`))
	if err != nil {
		t.Fatal(err)
	}
	user, db := source.User.Username(), strings.TrimPrefix(source.Path, "/")
	t.Cleanup(func() {
		su.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active", db)
		su.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)")
		su.Exec(ctx, "DROP ROLE "+user)
	})
	var super bool
	if err := su.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", user).Scan(&super); err != nil || super {
		t.Fatalf("the example's role %s: superuser %v (%v)", user, super, err)
	}
	local, err := url.Parse(cluster.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	source.Host = local.Host
	dsn := source.String()
	if err := run(ctx, dsn, "", 0, []string{"setup"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(script, "--auth trust") {
		t.Error("the serve line lets clients in without a password")
	}
	password := match(t, script, `echo '([^']+)' \| go run ./cmd/vecside passwd `)
	v, err := rpc.NewVerifier(password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	users, err := rpc.ParseUsers(strings.NewReader(rpc.UserLine(match(t, script, `passwd (\w+) >`), v)))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.Start(ctx, sidecar.Config{Source: dsn, Name: match(t, script, `--name (\w+)`), Listen: "127.0.0.1:0",
		DataDir: t.TempDir(), Auth: rpc.AuthSCRAM, Users: users, Indexes: []string{match(t, script, `--index '([^']+)'`)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	e, err := sc.Indexer.Get("docs_embedding")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if state, _ := e.State(); state == indexer.StateReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the index is not ready after a minute")
		}
	}
	side, err := url.Parse(match(t, script, `-sidecar '([^']+)'`))
	if err != nil {
		t.Fatal(err)
	}
	side.Host = sc.Addr.String()
	var out bytes.Buffer
	if err := run(ctx, dsn, side.String(), 1, []string{"search", "garden tomatoes"}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	first, second, _ := strings.Cut(out.String(), "after inserting")
	if !strings.Contains(first, "growing tomatoes in a small garden") || strings.Contains(out.String(), "greenhouse") {
		t.Errorf("the first search did not find tenant 1's tomato document first, or found tenant 2's:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(second), "\n")
	if len(lines) < 2 || !strings.Contains(lines[1], "notes on garden tomatoes") {
		t.Errorf("the search after the insert did not return the new document first:\n%s", second)
	}
}

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/sidecar"
	"github.com/vecside/vecside/rpc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// run runs the command line with args and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	app.ExitErrHandler = func(*cli.Context, error) {} // return exit codes as errors
	err := app.Run(append([]string{"vecside", "--log-level", "error"}, args...))
	return out.String(), err
}

func TestSearchCheckTeardown(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v real[]);
		INSERT INTO t VALUES (1, '{1,0}'), (2, '{0,1}'), (3, '{0.9,0.1}'), (4, NULL);
		CREATE TABLE nokey (v real[])`); err != nil {
		t.Fatal(err)
	}
	index := "t_v=t(v) key=id metric=l2"

	out, err := run(t, "check", "--source", dsn, "--index", index)
	if err != nil || !strings.Contains(out, "ok    index t_v") {
		t.Fatalf("check of a good table: %v\n%s", err, out)
	}
	out, err = run(t, "check", "--source", dsn, "--index", "n=nokey(v) key=id metric=l2")
	if err == nil || !strings.Contains(out, "FAIL  index n") || !strings.Contains(out, "fix:") {
		t.Fatalf("check of a table without key: %v\n%s", err, out)
	}

	sc, err := sidecar.Start(ctx, sidecar.Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust",
		Indexes: []string{index}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := sc.Indexer.Get("t_v")
	if err := waitReady(ctx, e, time.Minute); err != nil {
		t.Fatal(err)
	}
	addr := sc.Addr.String()
	out, err = run(t, "search", "--addr", addr, "--index", "t_v", "--k", "2", "[1,0]")
	if err != nil || !regexp.MustCompile(`(?s)id\s+distance\n1\s+0\n3\s+0\.14`).MatchString(out) {
		t.Fatalf("search: %v\n%s", err, out)
	}
	out, err = run(t, "search", "--addr", addr, "--index", "t_v", "--k", "1", "--source", dsn, "{0,1}")
	if err != nil || !regexp.MustCompile(`(?s)id\s+distance\n2\s+0\n$`).MatchString(out) {
		t.Fatalf("search with --source: %v\n%s", err, out)
	}
	if _, err := run(t, "search", "--addr", addr, "--index", "nope", "[1,0]"); err == nil || !strings.Contains(err.Error(), "42704") {
		t.Fatalf("search of an unknown index: %v", err)
	}
	if err := sc.Stop(); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "teardown", "--source", dsn)
	if err != nil || !strings.Contains(out, "dropped replication slot vecside") || !strings.Contains(out, "dropped publication vecside") {
		t.Fatalf("teardown: %v\n%s", err, out)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1000": 1000, "512MiB": 512 << 20, "6GiB": 6 << 30, "1.5KiB": 1536, "2 GiB": 2 << 30} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "lots", "5MB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
}

// TestLimitFlags: the client limit flags reach rpc.Limits, sizes in
// their units, and 0 means "never" or "none" where rpc's zero would mean
// the default.
func TestLimitFlags(t *testing.T) {
	var got rpc.Limits
	app := &cli.App{Flags: limitFlags, Action: func(c *cli.Context) (err error) {
		got, err = rpcLimits(c)
		return err
	}}
	if err := app.Run([]string{"x", "--max-connections", "7", "--reserved-connections", "0", "--idle-timeout", "0",
		"--max-reply-buffer", "64KiB", "--max-prepared-bytes", "1MiB", "--auth-timeout", "3s"}); err != nil {
		t.Fatal(err)
	}
	want := rpc.DefaultLimits
	want.MaxConnections, want.ReservedConnections, want.IdleTimeout = 7, -1, -1
	want.MaxReplyBuffer, want.MaxPreparedBytes, want.AuthTimeout = 64<<10, 1<<20, 3*time.Second
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if err := app.Run([]string{"x", "--max-reply-buffer", "lots"}); err == nil {
		t.Error("--max-reply-buffer lots accepted")
	}
}

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/sidecar"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestExample runs the example from start to finish against a real
// Postgres and sidecar: setup, then a search whose rows all belong to the
// tenant, nearest first, and which finds the document inserted just
// before it.
func TestExample(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	if err := run(ctx, dsn, "", 0, []string{"setup"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.Start(ctx, sidecar.Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", Auth: "trust",
		Indexes: []string{"docs_embedding=public.docs(embedding) key=id metric=cosine kind=hnsw"},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	var out bytes.Buffer
	if err := run(ctx, dsn, sc.Addr.String(), 1, []string{"search", "garden tomatoes"}, &out); err != nil {
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

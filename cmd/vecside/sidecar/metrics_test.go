package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/indexer/kind"
	"github.com/vecside/vecside/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestMetricsAndProbes runs a sidecar on a real database: /readyz is 503
// while the first copy is held back and 200 after; /metrics, scraped over
// HTTP, shows the series move as rows are written and searched; an index
// that fails shows in vecside_status() and the metrics, and keeps /readyz
// at 503 only with ReadyRequiresAll.
func TestMetricsAndProbes(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(ctx, pgtest.StandInVector+`
		CREATE TABLE items (id int PRIMARY KEY, v real[]);
		INSERT INTO items SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 200) g;
		CREATE TABLE bad (id int PRIMARY KEY, e vector(3))`); err != nil {
		t.Fatal(err)
	}
	indexes := []string{"items_v=items(v) key=id metric=l2 kind=flat", "bad_e=bad(e) key=id metric=l2 dims=4"}
	gate := make(chan struct{})
	cfg := Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", ProbesListen: "127.0.0.1:0",
		Auth: "trust", Indexes: indexes, DataDir: t.TempDir(), CheckpointInterval: 50 * time.Millisecond,
		BeforeCopy: func() { <-gate }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sc, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	probes, metrics := "http://"+sc.ProbesAddr.String(), "http://"+sc.MetricsAddr.String()

	waitFor(t, "the copy to be held back", func() bool { return stateOf(sc, "items_v") == indexer.StateBuilding })
	if code, body := get(t, probes+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: 0 ready") {
		t.Fatalf("/readyz during the first copy: %d %q, want 503", code, body)
	}
	if code, body := get(t, probes+"/healthz", ""); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, _ := get(t, probes+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("the probes listener serves /metrics: %d", code)
	}
	if _, err := Start(ctx, Config{Source: dsn, Name: "other", Listen: "127.0.0.1:0", Auth: "trust", MetricsListen: sc.MetricsAddr.String(), Indexes: indexes}); err == nil ||
		!strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("a second sidecar on the same metrics address: %v, want a hint naming --metrics-listen", err)
	}
	close(gate)
	waitFor(t, "/readyz to answer 200", func() bool { code, _ := get(t, probes+"/readyz", ""); return code == http.StatusOK })
	if _, body := get(t, probes+"/readyz", ""); body != "ready: 1 ready 0 building 1 error 0 waiting\n" {
		t.Errorf("/readyz with a failed index: %q", body)
	}
	var state, failure string
	side, err := pgx.Connect(ctx, "postgres://x@"+sc.Addr.String()+"/x?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close(ctx)
	if err := side.QueryRow(ctx, "SELECT state, error FROM vecside_status() WHERE index_name = 'bad_e'").Scan(&state, &failure); err != nil || state != "error" || !strings.Contains(failure, "vector(3)") {
		t.Errorf("vecside_status() of the failed index: %q %q %v", state, failure, err)
	}

	before := scrape(t, metrics)
	if _, err := db.Exec(ctx, `INSERT INTO items SELECT g, ARRAY[g, 2]::real[] FROM generate_series(201, 250) g`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inserts to be applied", func() bool { return scrape(t, metrics)[`vecside_index_rows{index="items_v"}`] == 250 })
	for range 5 {
		if _, err := side.Exec(ctx, "SELECT * FROM knn('items_v', '{1,1}', 3)"); err != nil {
			t.Fatal(err)
		}
	}
	side.Exec(ctx, "SELECT * FROM knn('nope', '{1,1}', 3)")
	waitFor(t, "a checkpoint of the inserts", func() bool {
		m := scrape(t, metrics)
		return m[`vecside_index_covered_lsn{index="items_v"}`] > before[`vecside_index_applied_lsn{index="items_v"}`]
	})
	after := scrape(t, metrics)
	for _, c := range []struct {
		series string
		delta  float64 // least increase
	}{
		{`vecside_index_rows{index="items_v"}`, 50},
		{`vecside_replication_changes_total`, 50},
		{`vecside_replication_transactions_total`, 1},
		{`vecside_index_applied_lsn{index="items_v"}`, 1},
		{`vecside_index_covered_lsn{index="items_v"}`, 1},
		{`vecside_index_search_duration_seconds_count{index="items_v",kind="flat"}`, 5},
		{`vecside_rpc_requests_total{kind="select_function",sqlstate="00000"}`, 5},
		{`vecside_rpc_errors_total{sqlstate="42704"}`, 1},
		{`vecside_index_checkpoints_total{index="items_v"}`, 1},
	} {
		if got := after[c.series] - before[c.series]; got < c.delta {
			t.Errorf("%s moved by %g (%g → %g), want at least %g", c.series, got, before[c.series], after[c.series], c.delta)
		}
	}
	for series, want := range map[string]float64{
		`vecside_index_state{index="bad_e",state="error"}`:   1,
		`vecside_index_state{index="items_v",state="ready"}`: 1,
		`vecside_index_skipped_rows{index="items_v"}`:        0,
		`vecside_index_lag_bytes{index="items_v"}`:           0,
		`vecside_ready`: 1,
	} {
		if got, ok := after[series]; !ok || got != want {
			t.Errorf("%s = %g (present %v), want %g", series, got, ok, want)
		}
	}
	for _, series := range []string{`vecside_index_checkpoint_age_seconds{index="items_v"}`, "process_resident_memory_bytes", "process_open_fds", "go_goroutines", `go_gc_duration_seconds_count`,
		`vecside_index_search_duration_seconds_bucket{index="items_v",kind="flat",le="+Inf"}`, "vecside_replication_changes_per_second"} {
		if _, ok := after[series]; !ok {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if err := sc.Stop(); err != nil {
		t.Fatal(err)
	}

	// The same indexes with ReadyRequiresAll, from the checkpoints; and a
	// token for /metrics, which the probes never ask for.
	cfg.ReadyRequiresAll, cfg.MetricsToken, cfg.BeforeCopy = true, "s3cret", nil
	sc, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	probes, metrics = "http://"+sc.ProbesAddr.String(), "http://"+sc.MetricsAddr.String()
	waitFor(t, "the index to be ready again", func() bool {
		return stateOf(sc, "items_v") == indexer.StateReady && stateOf(sc, "bad_e") == indexer.StateError
	})
	if code, body := get(t, probes+"/readyz", ""); code != http.StatusServiceUnavailable || body != "not ready: 1 ready 0 building 1 error 0 waiting\n" {
		t.Errorf("/readyz with --ready-requires-all and a failed index: %d %q", code, body)
	}
	if code, body := get(t, metrics+"/metrics", ""); code != http.StatusUnauthorized || strings.Contains(body, "items_v") {
		t.Errorf("/metrics without the token: %d %q, want 401", code, body)
	}
	if code, body := get(t, metrics+"/metrics", "wrong"); code != http.StatusUnauthorized || strings.Contains(body, "items_v") {
		t.Errorf("/metrics with a wrong token: %d, want 401", code)
	}
	if code, body := get(t, metrics+"/metrics", "s3cret"); code != http.StatusOK || !strings.Contains(body, "vecside_ready 0\n") {
		t.Errorf("/metrics with the token: %d, want 200 and vecside_ready 0", code)
	}
	if code, body := get(t, metrics+"/readyz", ""); code != http.StatusServiceUnavailable || strings.Contains(body, "items") || strings.Contains(body, "bad") {
		t.Errorf("/readyz on the metrics listener: %d %q, want 503 naming no index", code, body)
	}
}

// TestKindFigures: an index of every registered kind, on a running
// sidecar, shows each figure its kind declares as a series of /metrics,
// with the declared help and type, and in vecside_status()'s figures
// column; and no other kind's.
func TestKindFigures(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, v real[]);
		INSERT INTO items SELECT g, ARRAY[random(), random(), random(), random()]::real[] FROM generate_series(1, 300) g`); err != nil {
		t.Fatal(err)
	}
	var indexes []string
	for _, k := range indexer.Kinds() {
		indexes = append(indexes, fmt.Sprintf("items_%s=items(v) key=id metric=l2 kind=%s", k, k))
	}
	sc, err := Start(ctx, Config{Source: dsn, Name: "vecside", Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", Auth: "trust",
		Indexes: indexes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Stop()
	for _, k := range indexer.Kinds() {
		waitFor(t, k+" to be ready", func() bool { return stateOf(sc, "items_"+k) == indexer.StateReady })
	}
	_, body := get(t, "http://"+sc.MetricsAddr.String()+"/metrics", "")
	series := scrape(t, "http://"+sc.MetricsAddr.String())
	side, err := pgx.Connect(ctx, "postgres://x@"+sc.Addr.String()+"/x?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close(ctx)
	for _, name := range indexer.Kinds() {
		declared, _ := kind.Lookup(name)
		index := "items_" + name
		for _, f := range kind.Figures() {
			metric := "vecside_index_" + f.Name
			_, shown := series[metric+`{index="`+index+`"}`]
			if want := slices.Contains(declared.Figures, f); shown != want {
				t.Errorf("%s: %s present %v, want %v", index, metric, shown, want)
			}
			typ := map[kind.FigureType]string{kind.Gauge: "gauge", kind.Counter: "counter", kind.Memory: "gauge"}[f.Type]
			if header := fmt.Sprintf("# HELP %s %s\n# TYPE %s %s\n", metric, f.Help, metric, typ); !strings.Contains(body, header) {
				t.Errorf("/metrics lacks %q", header)
			}
		}
		var pairs *string // NULL for a kind without figures
		if err := side.QueryRow(ctx, "SELECT figures FROM vecside_status() WHERE index_name = '"+index+"'").Scan(&pairs); err != nil {
			t.Fatal(err)
		}
		var want, shown []string
		for _, f := range declared.Figures {
			want = append(want, f.Name)
		}
		if pairs != nil {
			for _, p := range strings.Fields(*pairs) {
				name, _, _ := strings.Cut(p, "=")
				shown = append(shown, name)
			}
		}
		if (pairs == nil) != (want == nil) || !slices.Equal(shown, want) {
			t.Errorf("%s: vecside_status() shows the figures %v, want %v", index, shown, want)
		}
	}
}

func stateOf(sc *Sidecar, name string) indexer.State {
	e, err := sc.Indexer.Get(name)
	if err != nil {
		return ""
	}
	s, _ := e.State()
	return s
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// scrape reads /metrics into series (name and labels as written) and
// values.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := get(t, base+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestReadiness(t *testing.T) {
	st := func(states ...indexer.State) []indexer.Status {
		var out []indexer.Status
		for _, s := range states {
			out = append(out, indexer.Status{State: s})
		}
		return out
	}
	const b, r, e, w = indexer.StateBuilding, indexer.StateReady, indexer.StateError, indexer.StateWaiting
	for _, c := range []struct {
		statuses   []indexer.Status
		requireAll bool
		want       bool
	}{
		{st(r, r), false, true},
		{st(r, b), false, false},
		{st(r, e), false, true},
		{st(r, e), true, false},
		{st(e), false, false},
		{st(b, e), false, false},
		{st(r, w), false, true},
		{st(r, w), true, false},
		{st(w), false, false},
		{nil, false, false},
	} {
		if got, counts := readiness(c.statuses, c.requireAll); got != c.want {
			t.Errorf("readiness(%s, requireAll %v) = %v, want %v", counts, c.requireAll, got, c.want)
		}
	}
}

func TestRateWindow(t *testing.T) {
	var w rateWindow
	t0 := time.Now()
	if got := w.perSecond(100, t0); got != 0 {
		t.Errorf("first sample: %g/s, want 0", got)
	}
	if got := w.perSecond(300, t0.Add(2*time.Second)); got != 100 {
		t.Errorf("200 in 2 s: %g/s, want 100", got)
	}
	w.perSecond(1300, t0.Add(12*time.Second))
	// The window keeps the last sample at or before its start: 2 s.
	if got := w.perSecond(1400, t0.Add(13*time.Second)); got != 1100.0/11 {
		t.Errorf("after 13 s: %g/s, want %g", got, 1100.0/11)
	}
}

// TestMetricsDocumented: docs/operations.md lists every series vecside adds.
func TestMetricsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	go func() { newCollector(nil).Describe(ch); close(ch) }()
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range ch {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		n++
		if !strings.Contains(string(readme), "`"+m[1]+"`") {
			t.Errorf("docs/operations.md does not list %s", m[1])
		}
	}
	if n < 40 {
		t.Errorf("%d series described, want all of them", n)
	}
}

//go:build cgo

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/rpc/proxy"
)

// TestProxyCommand: vecside proxy relays sessions to --upstream, given
// as host:port or as a connection string, asking the sidecar at --addr.
func TestProxyCommand(t *testing.T) {
	addr := sidecarFor(t, "cli_proxy", sidecar.Config{Auth: "trust"})
	cl := pgtest.Shared(t)
	for _, upstream := range []string{fmt.Sprintf("127.0.0.1:%d", cl.Port), fmt.Sprintf("host=127.0.0.1 port=%d sslmode=disable", cl.Port)} {
		listen, metrics := freeAddr(t), freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- newApp().RunContext(ctx, []string{"vecside", "--log-level", "error", "proxy", "--proxy-listen", listen, "--proxy-metrics-listen", metrics,
				"--upstream", upstream, "--addr", addr})
		}()
		c := dialProxy(t, ctx, cl.DSN("postgres"), listen, done)
		var who string
		if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != "postgres" {
			t.Errorf("--upstream %q, through vecside proxy: %q, %v", upstream, who, err)
		}
		if body := scrape(t, metrics); !strings.Contains(body, "vecside_proxy_sessions_total 1") {
			t.Errorf("--upstream %q, /metrics:\n%s", upstream, body)
		}
		c.Close(ctx)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vecside proxy --upstream %q: %v", upstream, err)
		}
	}
}

// TestServeProxy: vecside serve --proxy answers pgvector's statement on
// --proxy-listen from the index of its own process, forwarding to the
// server of --source when --upstream is not given, counts it on its own
// /metrics and the sidecar's, and stops with the sidecar.
func TestServeProxy(t *testing.T) {
	const name = "cli_serve_proxy"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	for _, sql := range []string{deploy.DistanceSQL, deploy.RealOperatorsSQL,
		"CREATE TABLE t (id int PRIMARY KEY, v real[]); INSERT INTO t SELECT g, ARRAY[g, 0] FROM generate_series(1, 200) g"} {
		if _, err := db.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := replicate.Teardown(context.Background(), dsn, name, sidecar.TeardownWait); err != nil {
			t.Error(err)
		}
	})
	listen, metrics, sidecarMetrics, dataDir := freeAddr(t), freeAddr(t), freeAddr(t), t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- newApp().RunContext(ctx, []string{"vecside", "--log-level", "error", "serve", "--source", dsn, "--name", name,
			"--index", "t_v=t(v) key=id metric=l2 kind=hnsw", "--listen", "127.0.0.1:0", "--metrics-listen", sidecarMetrics, "--data-dir", dataDir,
			"--auth", "trust", "--proxy", "--proxy-listen", listen, "--proxy-metrics-listen", metrics})
	}()
	stopped := false
	t.Cleanup(func() { // before dataDir goes
		if !stopped {
			cancel()
			<-done
		}
	})
	c := dialProxy(t, ctx, dsn, listen, done)
	// Until the index is ready, the statement passes through.
	var plan string
	for deadline := time.Now().Add(time.Minute); !strings.HasPrefix(plan, "accelerated: index t_v;") && time.Now().Before(deadline); {
		var ids []int32
		rows, err := c.Query(ctx, "SELECT id FROM t ORDER BY v <-> $1 LIMIT 3", []float32{3.2, 0})
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		}
		if err != nil || fmt.Sprint(ids) != "[3 4 2]" {
			t.Fatalf("through vecside serve --proxy: %v, %v; want [3 4 2]", ids, err)
		}
		if err := c.QueryRow(ctx, "SHOW vecside.last_plan", pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(plan, "accelerated: index t_v;") {
		t.Errorf("last plan %q, want accelerated by t_v", plan)
	}
	for _, addr := range []string{metrics, sidecarMetrics} {
		if body := scrape(t, addr); !strings.Contains(body, "\nvecside_proxy_accelerated_total ") {
			t.Errorf("/metrics at %s:\n%s", addr, body)
		}
	}
	// The sidecar's search histogram counts the proxy's searches, though
	// no knn call was made.
	if body := scrape(t, sidecarMetrics); !regexp.MustCompile(`\nvecside_index_search_duration_seconds_count\{index="t_v",kind="hnsw"\} [1-9]`).MatchString(body) {
		t.Errorf("no search of t_v counted in the sidecar's /metrics:\n%s", body)
	}
	c.Close(ctx)
	cancel()
	stopped = true
	if err := <-done; err != nil {
		t.Errorf("vecside serve --proxy: %v", err)
	}
}

// TestServeProxyFails: a proxy that cannot listen stops the sidecar, and
// vecside serve --proxy says why.
func TestServeProxyFails(t *testing.T) {
	const name = "cli_serve_proxy_fails"
	dsn := pgtest.Shared(t).NewDatabase(t)
	if _, err := pgtest.Connect(t, dsn).Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY, v real[])"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := replicate.Teardown(context.Background(), dsn, name, sidecar.TeardownWait); err != nil {
			t.Error(err)
		}
	})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = newApp().RunContext(ctx, []string{"vecside", "--log-level", "error", "serve", "--source", dsn, "--name", name,
		"--index", "t_v=t(v) key=id metric=l2 dims=2", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--data-dir", t.TempDir(),
		"--auth", "trust", "--proxy", "--proxy-listen", taken.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "proxy:") || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
		t.Errorf("vecside serve --proxy on a taken address: %v (context: %v)", err, ctx.Err())
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dialProxy connects to the server of dsn through the proxy at listen,
// waiting for it to listen, unless the command running it ends first
// (done, a channel of one, left holding its result).
func dialProxy(t *testing.T, ctx context.Context, dsn, listen string, done chan error) *pgx.Conn {
	t.Helper()
	cfg, err := proxy.ClientConfig(dsn, listen)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			t.Cleanup(func() { c.Close(context.Background()) })
			return c
		}
		select {
		case end := <-done:
			done <- end
			t.Fatalf("the proxy's command ended: %v", end)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// scrape reads the /metrics at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// TestFlagCategories: every flag of serve and of proxy is in a category,
// and --help prints the categories in their order.
func TestFlagCategories(t *testing.T) {
	for _, cmd := range []*cli.Command{serveCommand, proxyCommand} {
		var cats []string
		for _, f := range cmd.Flags {
			if f == cli.HelpFlag { // the parser's own, added at the first run
				continue
			}
			cat := f.(cli.CategorizableFlag).GetCategory()
			if cat == "" {
				t.Errorf("vecside %s --%s: no category", cmd.Name, f.Names()[0])
			}
			if !slices.Contains(cats, cat) {
				cats = append(cats, cat)
			}
		}
		slices.Sort(cats)
		help, err := run(t, cmd.Name, "--help")
		if err != nil {
			t.Fatal(err)
		}
		at := 0
		for _, cat := range cats {
			i := strings.Index(help[at:], "\n   "+cat+"\n")
			if i < 0 {
				t.Errorf("vecside %s --help: no %q after byte %d:\n%s", cmd.Name, cat, at, help)
				break
			}
			at += i + 1
		}
		options := strings.ReplaceAll(help[strings.Index(help, "\nOPTIONS:"):], "\n   --help, -h", "")
		if strings.Index(options, "\n   --") < strings.Index(options, cats[0]) {
			t.Errorf("vecside %s --help: a flag before the first category:\n%s", cmd.Name, help)
		}
	}
}

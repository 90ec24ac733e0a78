//go:build cgo

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/rpc/proxy"
)

// proxyBuilt: this binary has the proxy (cgo).
const proxyBuilt = true

// sidecarPool is a pool of connections to the sidecar at addr, one per
// client and one more, so that a client's candidates never wait for one.
func (b *bench) sidecarPool(ctx context.Context, addr string) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(b.sidecarURL(addr))
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = int32(b.p.clients) + 1
	pcfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		heapfetch.RegisterTypes(c.TypeMap())
		return nil
	}
	return pgxpool.NewWithConfig(ctx, pcfg)
}

// openProxy runs a proxy in this process in front of the bench's
// Postgres, asking t's sidecar over pgwire (vecside proxy) or, if
// inProcess, its indexer directly (vecside serve --proxy), and opens a
// connection per client through it. With --process, serve --proxy is
// the child's own.
func (b *bench) openProxy(ctx context.Context, t *vecsideTarget, inProcess bool) (*pathConns, error) {
	if inProcess && t.proxy != nil {
		return b.childProxy(ctx, t)
	}
	pctx, cancel := context.WithCancel(ctx)
	release := cancel
	path, side := benchreport.ServeProxy, proxy.InProcess(t.indexer, nil)
	if !inProcess {
		pool, err := b.sidecarPool(pctx, t.addr)
		if err != nil {
			cancel()
			return nil, err
		}
		release = func() {
			pool.Close()
			cancel()
		}
		client, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{pool}}})
		if err != nil {
			release()
			return nil, err
		}
		path, side = benchreport.Proxy, proxy.Remote(client, pool)
	}
	p, err := proxy.New(proxy.Config{Upstream: b.dsn, Sidecar: side, StatusInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		release()
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(pctx, ln) }()
	stop := func() {
		cancel()
		if err := <-served; err != nil {
			b.say("proxy: %v", err)
		}
		release()
		b.sayProxyStats(path, t, p.Stats(), nil)
	}
	pc, err := b.proxyClients(ctx, ln.Addr().String(), func() (proxy.Stats, error) { return p.Stats(), nil })
	if err != nil {
		stop()
		return nil, err
	}
	pc.stop = stop
	return pc, nil
}

// childProxy opens a connection per client through the proxy of t's
// child process, once it accelerates: it learns that the index is ready
// a moment after the bench does.
func (b *bench) childProxy(ctx context.Context, t *vecsideTarget) (*pathConns, error) {
	stats := func() (proxy.Stats, error) { return scrapeProxy(t.proxy.metrics) }
	pc, err := b.proxyClients(ctx, t.proxy.listen, stats)
	if err != nil {
		return nil, err
	}
	pc.stop = func() {
		st, err := stats()
		b.sayProxyStats(benchreport.ServeProxy, t, st, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		before, err := stats()
		if err == nil {
			_, err = b.proxyQuery(ctx, pc.conns[0], 0)
		}
		var after proxy.Stats
		if err == nil {
			after, err = stats()
		}
		if err == nil && after.Accelerated > before.Accelerated {
			return pc, nil
		}
		if err == nil && time.Now().After(deadline) {
			err = errors.New("no statement accelerated in a minute")
		}
		if err != nil {
			pc.close()
			return nil, fmt.Errorf("the proxy of vecside serve --proxy: %w", err)
		}
	}
}

func (b *bench) sayProxyStats(path string, t *vecsideTarget, st proxy.Stats, err error) {
	if err != nil {
		b.say("%s for %s: %v", path, t.def, err)
		return
	}
	b.say("%s for %s: %d statements accelerated, %d of them by the fast path (no vector read where the sidecar measured the row)",
		path, t.def, st.Accelerated, st.FastPath)
}

// proxyClients opens a connection per client through the proxy at addr,
// as an application would by changing its connection string. Their check
// fails when the proxy, whose counts stats reads, passed a statement
// through since the last check: it would have measured Postgres scanning
// the table.
func (b *bench) proxyClients(ctx context.Context, addr string, stats func() (proxy.Stats, error)) (*pathConns, error) {
	ccfg, err := proxy.ClientConfig(b.dsn, addr)
	if err != nil {
		return nil, err
	}
	ccfg.TLSConfig = nil // the bench's proxies decline TLS from clients
	pc, err := b.openClients(ctx, func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, ccfg.Copy()) })
	if err != nil {
		return nil, err
	}
	var last proxy.Stats
	pc.check = func() error {
		st, err := stats()
		if err != nil {
			return err
		}
		defer func() { last = st }()
		passed := map[string]uint64{}
		for reason, n := range st.Fallbacks {
			if d := n - last.Fallbacks[reason]; d > 0 {
				passed[reason] = d
			}
		}
		switch {
		case len(passed) > 0:
			return fmt.Errorf("the proxy passed statements through instead of asking the sidecar (by reason: %v); %d accelerated",
				passed, st.Accelerated-last.Accelerated)
		case st.Accelerated == last.Accelerated:
			return fmt.Errorf("the proxy accelerated no statement")
		}
		return nil
	}
	return pc, nil
}

// scrapeProxy reads a proxy's counts from its /metrics at addr.
func scrapeProxy(addr string) (proxy.Stats, error) {
	st := proxy.Stats{Fallbacks: map[string]uint64{}}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		series, value, ok := strings.Cut(lines.Text(), " ")
		n, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil || strings.HasPrefix(series, "#") {
			continue
		}
		switch name, labels, _ := strings.Cut(series, "{"); name {
		case "vecside_proxy_accelerated_total":
			st.Accelerated = uint64(n)
		case "vecside_proxy_fast_path_total":
			st.FastPath = uint64(n)
		case "vecside_proxy_passed_through_total":
			reason := strings.TrimSuffix(strings.TrimPrefix(labels, `reason="`), `"}`)
			st.Fallbacks[reason] = uint64(n)
		}
	}
	return st, lines.Err()
}

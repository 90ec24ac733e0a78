//go:build cgo

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/benchreport"
	"github.com/vecside/vecside/internal/proxy"
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
// connection per client through it, as an application would by changing
// its connection string.
func (b *bench) openProxy(ctx context.Context, t *vecsideTarget, inProcess bool) (*pathConns, error) {
	upstream, err := proxy.UpstreamOf(b.dsn)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	release := cancel
	path, side := benchreport.ServeProxy, proxy.InProcess(t.indexer)
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
	p, err := proxy.New(proxy.Config{Upstream: upstream, Sidecar: side, StatusInterval: 100 * time.Millisecond,
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
		st := p.Stats()
		b.say("%s for %s: %d statements accelerated, %d of them by the fast path (no vector read where the sidecar measured the row)",
			path, t.def, st.Accelerated, st.FastPath)
	}
	ccfg, err := pgx.ParseConfig(b.dsn)
	if err != nil {
		stop()
		return nil, err
	}
	// The proxy declines TLS from clients.
	addr := ln.Addr().(*net.TCPAddr)
	ccfg.Host, ccfg.Port, ccfg.TLSConfig, ccfg.Fallbacks = addr.IP.String(), uint16(addr.Port), nil, nil
	pc, err := b.openClients(ctx, func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, ccfg.Copy()) })
	if err != nil {
		stop()
		return nil, err
	}
	pc.stop = stop
	// check fails when a statement was passed through since the last
	// check: it would have measured Postgres scanning the table.
	var last proxy.Stats
	pc.check = func() error {
		st := p.Stats()
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

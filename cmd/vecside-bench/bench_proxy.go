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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/proxy"
)

// proxyBuilt: this binary has the proxy (cgo).
const proxyBuilt = true

// openProxy runs a proxy in this process in front of the bench's
// Postgres, asking t's sidecar, and opens a connection per client
// through it, as an application would by changing its connection string.
func (b *bench) openProxy(ctx context.Context, t *vecsideTarget) (*pathConns, error) {
	up, err := pgconn.ParseConfig(b.dsn)
	if err != nil {
		return nil, err
	}
	upstream := net.JoinHostPort(up.Host, fmt.Sprint(up.Port))
	if len(up.Host) > 0 && up.Host[0] == '/' { // a Unix socket's directory
		upstream = fmt.Sprintf("%s/.s.PGSQL.%d", up.Host, up.Port)
	}
	pcfg, err := pgxpool.ParseConfig(b.sidecarURL(t.addr))
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = int32(b.p.clients) + 1 // a client's candidates never wait for a pooled connection
	pcfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		heapfetch.RegisterTypes(c.TypeMap())
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	pool, err := pgxpool.NewWithConfig(pctx, pcfg)
	if err != nil {
		cancel()
		return nil, err
	}
	side, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{pool}}})
	var p *proxy.Proxy
	if err == nil {
		p, err = proxy.New(proxy.Config{Upstream: upstream, Sidecar: side, Status: pool, StatusInterval: 100 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		pool.Close()
		cancel()
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(pctx, ln) }()
	stop := func() {
		cancel()
		if err := <-served; err != nil {
			b.say("proxy: %v", err)
		}
		pool.Close()
		st := p.Stats()
		b.say("proxy for %s: %d statements accelerated, %d of them by the fast path (no vector read where the sidecar measured the row)",
			t.def, st.Accelerated, st.FastPath)
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

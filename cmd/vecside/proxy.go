//go:build cgo

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/proxy"
)

var proxyCommand = &cli.Command{
	Name:  "proxy",
	Usage: "speak PostgreSQL's protocol in front of it, answering pgvector's nearest-neighbour queries through a sidecar",
	Description: `Clients connect to --listen as to PostgreSQL (same databases, roles and
passwords: authentication is PostgreSQL's, relayed). Each session gets its
own upstream connection, as its own role. Statements of the form
SELECT ... FROM t [WHERE ...] ORDER BY col <->|<=>|<#> vector LIMIT k on a
column the sidecar indexes are run restricted to the sidecar's candidates;
everything else passes through unchanged. See internal/proxy's doc.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "listen", Value: "127.0.0.1:6432", Usage: "address clients connect to, as to PostgreSQL", EnvVars: []string{"VECSIDE_PROXY_LISTEN"}},
		&cli.StringFlag{Name: "upstream", Usage: "PostgreSQL's address: host:port, or a Unix socket's path (/var/run/postgresql/.s.PGSQL.5432). PostgreSQL sees every client coming from the proxy's address: its pg_hba.conf must ask that address for passwords", Required: true, EnvVars: []string{"VECSIDE_UPSTREAM"}},
		addrFlag,
		userFlag,
		&cli.BoolFlag{Name: "no-sidecar", Usage: "pass every statement through, asking no sidecar", EnvVars: []string{"VECSIDE_NO_SIDECAR"}},
		&cli.IntFlag{Name: "max-connections", Value: proxy.DefaultLimits.MaxConnections, Usage: "client connections at once, each holding one upstream connection; past it new ones are refused (53300)", EnvVars: []string{"VECSIDE_PROXY_MAX_CONNECTIONS"}},
		&cli.DurationFlag{Name: "auth-timeout", Value: proxy.DefaultLimits.AuthTimeout, Usage: "time a client has from connecting to being authenticated", EnvVars: []string{"VECSIDE_PROXY_AUTH_TIMEOUT"}},
	},
	Action: func(c *cli.Context) error {
		ctx, stop := shutdownOnSignal(c.Context)
		defer stop()
		cfg := proxy.Config{
			Upstream: c.String("upstream"),
			Limits:   proxy.Limits{MaxConnections: c.Int("max-connections"), AuthTimeout: c.Duration("auth-timeout")},
			Logger:   slog.Default(),
		}
		if !c.Bool("no-sidecar") {
			pcfg, err := pgxpool.ParseConfig(sidecarURL(c.String("addr"), c.String("user")))
			if err != nil {
				return fmt.Errorf("--addr: %w", err)
			}
			pcfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
				heapfetch.RegisterTypes(conn.TypeMap())
				return nil
			}
			pool, err := pgxpool.NewWithConfig(ctx, pcfg)
			if err != nil {
				return fmt.Errorf("--addr: %w", err)
			}
			defer pool.Close()
			if cfg.Sidecar, err = heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{pool}}}); err != nil {
				return err
			}
			cfg.Status = pool
		}
		p, err := proxy.New(cfg)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", c.String("listen"))
		if err != nil {
			return err
		}
		slog.Info("vecside proxy serving", "listen", ln.Addr().String(), "upstream", cfg.Upstream, "sidecar", !c.Bool("no-sidecar"))
		return p.Serve(ctx, ln)
	},
}

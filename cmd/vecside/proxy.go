//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/rpc/proxy"
)

var proxyCommand = &cli.Command{
	Name:  "proxy",
	Usage: "speak PostgreSQL's protocol in front of it, answering pgvector's nearest-neighbour queries through a sidecar",
	Description: `Clients connect to --proxy-listen as to PostgreSQL (same databases, roles
and passwords: authentication is PostgreSQL's, relayed). Each session gets
its own upstream connection, as its own role. Statements of the form
SELECT ... FROM t [WHERE ...] ORDER BY col <->|<=>|<#> vector LIMIT k on a
column the sidecar indexes are run restricted to the sidecar's candidates;
everything else passes through unchanged. See rpc/proxy's doc.

vecside serve --proxy runs the same proxy inside the sidecar's process,
which saves a round trip per statement.`,
	Flags: append(proxyFlags(true, proxyCategory),
		categorized(catProxySidecar, addrFlag, userFlag,
			&cli.BoolFlag{Name: "no-sidecar", Usage: "pass every statement through, asking no sidecar", EnvVars: []string{"VECSIDE_NO_SIDECAR"}})...,
	),
	Action: func(c *cli.Context) error {
		ctx, stop := shutdownOnSignal(c.Context)
		defer stop()
		cfg, err := proxyConfig(c, c.String("upstream"))
		if err != nil {
			return err
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
			client, err := heapfetch.NewClient(heapfetch.Config{Shards: [][]heapfetch.Querier{{pool}}})
			if err != nil {
				return err
			}
			cfg.Sidecar = proxy.Remote(client, pool)
		}
		return runProxy(ctx, c, cfg, nil)
	},
}

// serveProxyFlags are serve's flags for --proxy.
var serveProxyFlags = append([]cli.Flag{proxyFlag}, proxyFlags(false, func(string) string { return catProxy })...)

// The categories of vecside proxy --help.
const (
	catProxyUpstream = "1. PostgreSQL and listeners:"
	catProxySidecar  = "2. Sidecar:"
	catProxyTLS      = "3. TLS from clients:"
	catProxyLimits   = "4. Client limits:"
)

// proxyCategory is the category of vecside proxy --help each of
// proxyFlags' kinds goes into.
func proxyCategory(kind string) string {
	return map[string]string{"upstream": catProxyUpstream, "sidecar": catProxySidecar, "tls": catProxyTLS, "limits": catProxyLimits}[kind]
}

// proxyFlags are the proxy's flags, of vecside proxy and of vecside
// serve --proxy, in the categories cat gives each kind of them
// (upstream, sidecar, tls, limits). They are named proxy-*: one config
// file serves every command, and serve's listen and limits mean other
// things. serve's --upstream is optional: PostgreSQL is where --source
// is.
func proxyFlags(upstreamRequired bool, cat func(kind string) string) []cli.Flag {
	upstream := "PostgreSQL: a libpq connection string or URL ('host=db port=5432 sslmode=verify-full sslrootcert=ca.crt'; hosts tried in turn, libpq's sslmodes, sslrootcert, sslcert, sslkey; user, dbname and password are each client's own), host:port, or a Unix socket's path (/var/run/postgresql/.s.PGSQL.5432). Without sslmode: no TLS (with TLS on both sides SCRAM clients must disable channel binding). PostgreSQL sees every client coming from the proxy's address: its pg_hba.conf must ask that address for passwords"
	if !upstreamRequired {
		upstream += "; empty: --source (its hosts, ports and ssl settings)"
	}
	up, side, tls, limits := cat("upstream"), cat("sidecar"), cat("tls"), cat("limits")
	return []cli.Flag{
		&cli.StringFlag{Category: up, Name: "upstream", Usage: upstream, Required: upstreamRequired, EnvVars: []string{"VECSIDE_UPSTREAM"}},
		&cli.StringFlag{Category: up, Name: "proxy-listen", Value: "127.0.0.1:6432", Usage: "address clients connect to, as to PostgreSQL", EnvVars: []string{"VECSIDE_PROXY_LISTEN"}},
		&cli.StringFlag{Category: up, Name: "proxy-metrics-listen", Usage: "address of /metrics (the proxy's counters, Go and process series); empty disables. Names no table: it counts statements by outcome", EnvVars: []string{"VECSIDE_PROXY_METRICS_LISTEN"}},
		&cli.DurationFlag{Category: side, Name: "proxy-candidate-wait", Value: proxy.DefaultCandidateWait, Usage: "longest a statement waits for the sidecar's candidates (read-your-writes wait included; less under a shorter statement_timeout); past it the statement passes through", EnvVars: []string{"VECSIDE_PROXY_CANDIDATE_WAIT"}},
		&cli.StringFlag{Category: tls, Name: "proxy-tls-cert", Usage: "PEM certificate (chain) offered to clients that ask for TLS. With TLS upstream too, SCRAM clients must connect with channel_binding=disable: channel binding detects the proxy in the middle", EnvVars: []string{"VECSIDE_PROXY_TLS_CERT"}},
		&cli.StringFlag{Category: tls, Name: "proxy-tls-key", Usage: "PEM private key of --proxy-tls-cert", EnvVars: []string{"VECSIDE_PROXY_TLS_KEY"}},
		&cli.BoolFlag{Category: tls, Name: "proxy-tls-required", Usage: "refuse clients that do not use TLS (28000)", EnvVars: []string{"VECSIDE_PROXY_TLS_REQUIRED"}},
		&cli.IntFlag{Category: limits, Name: "proxy-max-connections", Value: proxy.DefaultLimits.MaxConnections, Usage: "sessions at once (clients past their startup message), each holding one upstream connection; past it new ones are refused (53300)", EnvVars: []string{"VECSIDE_PROXY_MAX_CONNECTIONS"}},
		&cli.IntFlag{Category: limits, Name: "proxy-max-startups", Value: proxy.DefaultLimits.MaxStartups, Usage: "connections not yet authenticated, on top of --proxy-max-connections; a new one takes the slot of the one silent longest", EnvVars: []string{"VECSIDE_PROXY_MAX_STARTUPS"}},
		&cli.IntFlag{Category: limits, Name: "proxy-max-startups-per-peer", Value: proxy.DefaultLimits.MaxStartupsPerPeer, Usage: "of --proxy-max-startups, those of one address that have sent nothing; past it its own oldest gives way", EnvVars: []string{"VECSIDE_PROXY_MAX_STARTUPS_PER_PEER"}},
		&cli.IntFlag{Category: limits, Name: "proxy-max-authenticating-per-peer", Value: proxy.DefaultLimits.MaxAuthenticatingPerPeer, Usage: "connections of one address authenticating at a time, each holding an upstream connection; the others wait their turn, holding neither, until --proxy-auth-timeout (then 53300)", EnvVars: []string{"VECSIDE_PROXY_MAX_AUTHENTICATING_PER_PEER"}},
		&cli.DurationFlag{Category: limits, Name: "proxy-auth-timeout", Value: proxy.DefaultLimits.AuthTimeout, Usage: "time a client has from connecting to being authenticated", EnvVars: []string{"VECSIDE_PROXY_AUTH_TIMEOUT"}},
	}
}

// proxyConfig is the proxy's configuration from its flags, forwarding to
// upstream, asking no sidecar yet.
func proxyConfig(c *cli.Context, upstream string) (proxy.Config, error) {
	cfg := proxy.Config{
		Upstream: upstream,
		Limits: proxy.Limits{MaxConnections: c.Int("proxy-max-connections"), MaxStartups: c.Int("proxy-max-startups"),
			MaxStartupsPerPeer: c.Int("proxy-max-startups-per-peer"), MaxAuthenticatingPerPeer: c.Int("proxy-max-authenticating-per-peer"),
			AuthTimeout: c.Duration("proxy-auth-timeout")},
		CandidateWait: c.Duration("proxy-candidate-wait"),
		Logger:        slog.Default(),
	}
	var err error
	if cfg.ClientTLS, err = loadTLS(c, "proxy-tls-cert", "proxy-tls-key"); err != nil {
		return cfg, err
	}
	if cfg.ClientTLSRequired = c.Bool("proxy-tls-required"); cfg.ClientTLSRequired && cfg.ClientTLS == nil {
		return cfg, errors.New("--proxy-tls-required needs --proxy-tls-cert and --proxy-tls-key")
	}
	return cfg, err
}

// runProxy serves cfg on --proxy-listen, and its metrics on
// --proxy-metrics-listen and, if register is not nil, wherever it
// registers them, until ctx ends.
func runProxy(ctx context.Context, c *cli.Context, cfg proxy.Config, register func(prometheus.Collector) error) error {
	p, err := proxy.New(cfg)
	if err != nil {
		return err
	}
	if register != nil {
		if err := register(proxyCollector{p}); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", c.String("proxy-listen"))
	if err != nil {
		return err
	}
	if addr := c.String("proxy-metrics-listen"); addr != "" {
		mln, err := net.Listen("tcp", addr)
		if err != nil {
			ln.Close()
			return err
		}
		srv := &http.Server{Handler: proxyMetrics(p), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(mln)
		defer srv.Close()
	}
	slog.Info("vecside proxy serving", "listen", ln.Addr().String(), "upstream", p.UpstreamAddrs(), "sidecar", cfg.Sidecar != nil)
	return p.Serve(ctx, ln)
}

// serveProxy runs vecside serve --proxy's proxy, asking the indexes of
// sc, with its series on sc's /metrics too, until ctx ends.
func serveProxy(ctx context.Context, c *cli.Context, sc *sidecar.Sidecar) error {
	upstream := c.String("upstream")
	if upstream == "" {
		upstream = c.String("source")
	}
	cfg, err := proxyConfig(c, upstream)
	if err != nil {
		return err
	}
	cfg.Sidecar = proxy.InProcess(sc.Indexer, sc.Server.ObserveSearch)
	return runProxy(ctx, c, cfg, sc.Register)
}

var (
	mProxySessions    = prometheus.NewDesc("vecside_proxy_sessions_total", "Client sessions the proxy has started (authenticated upstream).", nil, nil)
	mProxyLooped      = prometheus.NewDesc("vecside_proxy_looped_sessions_total", "Client sessions relayed by the proxy's epoll loop; the rest (over TLS) by goroutines.", nil, nil)
	mProxyAccelerated = prometheus.NewDesc("vecside_proxy_accelerated_total", "Nearest-neighbour statements answered through the sidecar.", nil, nil)
	mProxyFastPath    = prometheus.NewDesc("vecside_proxy_fast_path_total", "Accelerated statements ordered by the sidecar's exact distances where rows were the versions it measured, their vectors not read.", nil, nil)
	mProxyPassed      = prometheus.NewDesc("vecside_proxy_passed_through_total", "Nearest-neighbour statements recognised but passed through, by reason.", []string{"reason"}, nil)
	mProxyBadCancels  = prometheus.NewDesc("vecside_proxy_bad_cancel_requests_total", "Cancel requests with a key no session has.", nil, nil)
	mProxyEvicted     = prometheus.NewDesc("vecside_proxy_startups_evicted_total", "Connections closed before authenticating, their startup slot given to a newer one.", nil, nil)
	mProxyTurnTimeout = prometheus.NewDesc("vecside_proxy_authentication_turn_timeouts_total", "Connections refused at the authentication timeout while other connections of their address authenticated.", nil, nil)
)

// proxyCollector turns the proxy's Stats into series at each scrape.
type proxyCollector struct{ p *proxy.Proxy }

func (c proxyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mProxySessions, mProxyLooped, mProxyAccelerated, mProxyFastPath, mProxyPassed, mProxyBadCancels, mProxyEvicted, mProxyTurnTimeout} {
		ch <- d
	}
}

func (c proxyCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Stats()
	ch <- prometheus.MustNewConstMetric(mProxySessions, prometheus.CounterValue, float64(st.Sessions))
	ch <- prometheus.MustNewConstMetric(mProxyLooped, prometheus.CounterValue, float64(st.Looped))
	ch <- prometheus.MustNewConstMetric(mProxyAccelerated, prometheus.CounterValue, float64(st.Accelerated))
	ch <- prometheus.MustNewConstMetric(mProxyFastPath, prometheus.CounterValue, float64(st.FastPath))
	ch <- prometheus.MustNewConstMetric(mProxyBadCancels, prometheus.CounterValue, float64(st.BadCancels))
	ch <- prometheus.MustNewConstMetric(mProxyEvicted, prometheus.CounterValue, float64(st.Evicted))
	ch <- prometheus.MustNewConstMetric(mProxyTurnTimeout, prometheus.CounterValue, float64(st.TurnTimeouts))
	for reason, n := range st.Fallbacks {
		ch <- prometheus.MustNewConstMetric(mProxyPassed, prometheus.CounterValue, float64(n), reason)
	}
}

// proxyMetrics serves /metrics for the proxy p.
func proxyMetrics(p *proxy.Proxy) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector(), proxyCollector{p})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

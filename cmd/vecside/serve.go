package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/bytesize"
	"github.com/vecside/vecside/rpc"
)

var serveCommand = &cli.Command{
	Name:  "serve",
	Usage: "follow a database through logical replication and answer knn requests",
	Description: `With no --index, vecside serves what the database declares: each
pgvector index (CREATE INDEX ... USING hnsw (embedding vector_cosine_ops))
and each column commented for it (COMMENT ON COLUMN items.embedding IS
'vecside: metric=cosine kind=ivf'), as they are created and dropped.

Each --index names a table's vector column to index, beside those or
instead of one of them:

   --index 'items_embedding=public.items(embedding) key=id metric=cosine kind=flat'

key is the table's primary key (or REPLICA IDENTITY USING INDEX column);
metric is l2 (pgvector's <->), cosine (<=>) or ip (<#>); dims=N fixes the
dimension of real[] columns (vector(n) columns carry theirs).

vecside creates one publication and one replication slot, both named
--name; "vecside teardown" removes them.

--proxy also runs vecside proxy in this process, asking these indexes
with no round trip: applications connect to --proxy-listen as to
PostgreSQL (see vecside proxy --help).`,
	Flags: slices.Concat(
		categorized(catSource, configFlag, sourceFlag, nameFlag),
		[]cli.Flag{
			&cli.StringSliceFlag{Category: catSource, Name: "index", Usage: "an index: 'NAME=SCHEMA.TABLE(COLUMN) key=KEYCOL metric=l2|cosine|ip kind=flat' (repeatable); where='CONDITION' indexes only the rows that satisfy it, a condition on the key (a row filter on this sidecar's publication: one shard of a table several sidecars share)", EnvVars: []string{"VECSIDE_INDEX"}},
			&cli.StringFlag{Category: catSource, Name: "discover", Value: "auto", Usage: "also serve the indexes the database declares: its pgvector indexes (hnsw, ivfflat) and its columns commented 'vecside: metric=… [kind=…]', followed as they are created and dropped: auto (when no --index is given), on or off", EnvVars: []string{"VECSIDE_DISCOVER"}},
			&cli.StringSliceFlag{Category: catSource, Name: "discover-tables", Usage: "serve only the declarations of tables matching these schema.table globs; a pattern starting with ! excludes (repeatable: --discover-tables 'public.*' --discover-tables '!public.tmp_*')", EnvVars: []string{"VECSIDE_DISCOVER_TABLES"}},
			&cli.DurationFlag{Category: catSource, Name: "discover-interval", Value: 5 * time.Second, Usage: "how often the catalog is read for declared indexes", EnvVars: []string{"VECSIDE_DISCOVER_INTERVAL"}},
			&cli.StringFlag{Category: catSource, Name: "on-slot-lost", Value: "fail", Usage: "when Postgres invalidates the slot: fail (stop with an error) or resync (copy the tables again)", EnvVars: []string{"VECSIDE_ON_SLOT_LOST"}},
			&cli.DurationFlag{Category: catSource, Name: "receive-timeout", Value: time.Minute, Usage: "reconnect when the replication connection has been silent this long, even after asking the server to answer (a network partition or a vanished server)", EnvVars: []string{"VECSIDE_RECEIVE_TIMEOUT"}},
			&cli.StringFlag{Category: catListeners, Name: "listen", Value: "127.0.0.1:6433", Usage: "address of the pgwire server (a second sidecar on the same host needs its own, as for every listener)", EnvVars: []string{"VECSIDE_LISTEN"}},
			&cli.StringFlag{Category: catListeners, Name: "unix-socket-dir", Usage: "also listen on a Unix socket in this directory, named as PostgreSQL names its own (.s.PGSQL.<port of --listen>; psql -h DIR -p PORT), with startup slots of its own: the admin's way in while a flood fills the TCP listener's. Mode 0770", EnvVars: []string{"VECSIDE_UNIX_SOCKET_DIR"}},
			&cli.StringFlag{Category: catListeners, Name: "metrics-listen", Value: "127.0.0.1:9433", Usage: "address of /metrics, /healthz and /readyz; empty disables. /metrics names indexes: keep it on loopback or set --metrics-token-file", EnvVars: []string{"VECSIDE_METRICS_LISTEN"}},
			&cli.StringFlag{Category: catListeners, Name: "probes-listen", Usage: "address of /healthz and /readyz alone, which name nothing, e.g. :8080 for a kubelet while /metrics stays on loopback; empty disables", EnvVars: []string{"VECSIDE_PROBES_LISTEN"}},
			&cli.BoolFlag{Category: catListeners, Name: "ready-requires-all", Usage: "/readyz answers 503 while any index is in error or waiting for its table (by default such an index shows in status and metrics, and the others serve)", EnvVars: []string{"VECSIDE_READY_REQUIRES_ALL"}},
			&cli.StringFlag{Category: catSecurity, Name: "metrics-token-file", Usage: "file holding a bearer token that /metrics asks for (Prometheus: authorization.credentials_file)", EnvVars: []string{"VECSIDE_METRICS_TOKEN_FILE"}},
			&cli.StringFlag{Category: catCheckpoints, Name: "data-dir", Value: "vecside-data", Usage: "directory for index checkpoints", EnvVars: []string{"VECSIDE_DATA_DIR"}},
			&cli.DurationFlag{Category: catCheckpoints, Name: "checkpoint-interval", Value: 5 * time.Minute, Usage: "checkpoint an index with changes at least this often", EnvVars: []string{"VECSIDE_CHECKPOINT_INTERVAL"}},
			&cli.Uint64Flag{Category: catCheckpoints, Name: "checkpoint-changes", Value: 100000, Usage: "checkpoint an index once this many changes are applied since its last checkpoint", EnvVars: []string{"VECSIDE_CHECKPOINT_CHANGES"}},
			&cli.IntFlag{Category: catSearches, Name: "max-searches", Usage: "searches that run at once (more only slow each other and the stream down)", DefaultText: "one per core", EnvVars: []string{"VECSIDE_MAX_SEARCHES"}},
			&cli.IntFlag{Category: catSearches, Name: "max-queued-searches", Usage: "searches that wait for a turn beyond --max-searches before new ones are refused with SQLSTATE 53000", DefaultText: "64 per running search", EnvVars: []string{"VECSIDE_MAX_QUEUED_SEARCHES"}},
			&cli.IntFlag{Category: catSearches, Name: "gc-percent", Value: 25, Usage: "Go garbage collector target: heap growth over the live heap, in percent, before a collection (GOGC, which overrides it); the indexes are large and hold no pointers, so collections are cheap and a low target keeps the process's size near the indexes' size", EnvVars: []string{"VECSIDE_GC_PERCENT"}},
			&cli.StringFlag{Category: catSearches, Name: "memory-limit", Usage: "soft memory limit for the process, e.g. 6GiB (GOMEMLIMIT, which overrides it): the collector works harder as it nears it", EnvVars: []string{"VECSIDE_MEMORY_LIMIT"}},
		},
		authFlags, limitFlags, serveProxyFlags,
	),
	Action: func(c *cli.Context) error {
		if err := setMemoryPolicy(c.Int("gc-percent"), c.String("memory-limit")); err != nil {
			return err
		}
		limits, err := rpcLimits(c)
		if err != nil {
			return err
		}
		token, err := readSecretFile("metrics-token-file", c.String("metrics-token-file"))
		if err != nil {
			return err
		}
		users, pgTLS, metricsTLS, err := serverAuth(c)
		if err != nil {
			return err
		}
		ctx, stop := shutdownOnSignal(c.Context)
		defer stop()
		sc, err := sidecar.Start(ctx, sidecar.Config{
			Source:        c.String("source"),
			Name:          slotName(c),
			Listen:        c.String("listen"),
			UnixSocketDir: c.String("unix-socket-dir"),
			MetricsListen: c.String("metrics-listen"),
			ProbesListen:  c.String("probes-listen"),

			ReadyRequiresAll: c.Bool("ready-requires-all"),
			Auth:             c.String("auth"),
			Users:            users,
			TLS:              pgTLS,
			TLSRequired:      c.Bool("tls-required"),
			MetricsTLS:       metricsTLS,
			Indexes:          c.StringSlice("index"),
			Discovery:        sidecar.Discovery{Mode: c.String("discover"), Tables: c.StringSlice("discover-tables"), Interval: c.Duration("discover-interval")},

			OnSlotLost:         c.String("on-slot-lost"),
			ReceiveTimeout:     c.Duration("receive-timeout"),
			DataDir:            c.String("data-dir"),
			CheckpointInterval: c.Duration("checkpoint-interval"),
			CheckpointChanges:  c.Uint64("checkpoint-changes"),
			Searches:           indexer.Limits{Running: c.Int("max-searches"), Queued: c.Int("max-queued-searches")},
			Clients:            limits,
			AdminUser:          c.String("admin-user"),
			MetricsToken:       token,
			CopyProgress:       copyProgress(os.Stderr),
		})
		if err != nil {
			return err
		}
		if users != nil {
			defer reloadUsersOnHangup(ctx, sc.Server, c.String("users"))()
		}
		if c.Bool("proxy") {
			return serveWithProxy(ctx, c, sc)
		}
		return sc.Wait()
	},
}

var proxyFlag = &cli.BoolFlag{Category: catProxy, Name: "proxy", Usage: "also run the proxy (vecside proxy) in this process, on --proxy-listen, asking these indexes: no round trip to a sidecar per statement, but a restart of the sidecar ends the proxy's sessions too", EnvVars: []string{"VECSIDE_PROXY"}}

// serveWithProxy runs serve --proxy's proxy beside sc until either ends:
// a proxy that fails stops the sidecar, and a sidecar that stops ends
// the proxy.
func serveWithProxy(ctx context.Context, c *cli.Context, sc *sidecar.Sidecar) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	proxied := make(chan error, 1)
	go func() {
		err := serveProxy(ctx, c, sc)
		if err != nil {
			sc.Shutdown()
			err = fmt.Errorf("proxy: %w", err)
		}
		proxied <- err
	}()
	err := sc.Wait()
	cancel()
	return errors.Join(err, <-proxied)
}

var sourceFlag = &cli.StringFlag{
	Name:     "source",
	Usage:    "the database: a libpq connection string or URL (password from it, PGPASSWORD or a passfile)",
	EnvVars:  []string{"VECSIDE_SOURCE"},
	Required: true,
}

// shutdownOnSignal returns a context that ends at SIGINT or SIGTERM, and
// logs which signal ended it and where it came from: a clean shutdown
// writes the final checkpoints, and an operator should be able to tell
// who asked for it.
func shutdownOnSignal(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			slog.Info("shutting down: checkpointing and closing connections", "signal", sig.String(), "parent_pid", os.Getppid())
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}

// reloadUsersOnHangup reads the users file again at each SIGHUP, until
// ctx ends or the returned func is called; a file that does not parse
// leaves the users as they were.
func reloadUsersOnHangup(ctx context.Context, srv *rpc.Server, path string) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				users, err := rpc.LoadUsers(path)
				if err == nil {
					err = srv.SetUsers(users)
				}
				if err != nil {
					slog.Error("users file not reloaded: the users stay as they were", "err", err)
					continue
				}
				slog.Info("users file reloaded", "users", users.Len())
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// setMemoryPolicy sets the collector's target and soft limit, unless the
// GOGC and GOMEMLIMIT variables do. The index slabs are large and
// pointer-free: the collector marks little, so collecting more often costs
// little, and with the default target of 100 the heap would grow to twice
// the indexes before a collection.
func setMemoryPolicy(gcPercent int, limit string) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if limit != "" && os.Getenv("GOMEMLIMIT") == "" {
		n, err := bytesize.Parse(limit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		debug.SetMemoryLimit(n)
	}
	return nil
}

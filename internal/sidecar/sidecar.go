// Package sidecar assembles a running vecside from its parts: the set of
// indexes, the replicator that feeds them, the pgwire server that answers
// from them, and the metrics listener. The serve and demo commands and the
// end-to-end tests all start it the same way.
package sidecar

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/rpc"
)

// Config says what to follow and where to serve; the serve command's flags
// document each field.
type Config struct {
	Source        string // libpq connection string or URL
	Name          string // publication and slot
	Listen        string // pgwire address; port 0 picks a free one
	MetricsListen string // /metrics and /healthz address; empty disables
	Auth          string // client authentication method
	Users         *rpc.Users
	TLS           *tls.Config // pgwire TLS, if any
	TLSRequired   bool
	MetricsTLS    *tls.Config // HTTPS for /metrics and /healthz, if set
	Indexes       []string    // --index definitions
	OnSlotLost    string      // fail or resync
	// ReceiveTimeout is how long the stream may be silent before its
	// connection is presumed dead; zero takes the replicator's default.
	ReceiveTimeout time.Duration
	// DataDir holds checkpoints; empty keeps everything in memory (a
	// restart copies the tables again).
	DataDir            string
	CheckpointInterval time.Duration
	CheckpointChanges  uint64
	// Searches bounds the searches running and waiting at once; zero
	// values take the indexer's defaults.
	Searches indexer.Limits
	// Clients bounds what pgwire clients can hold; AdminUser may use the
	// reserved sessions.
	Clients   rpc.Limits
	AdminUser string
	// MetricsToken, if set, is the bearer token /metrics asks for.
	MetricsToken string
	Logger       *slog.Logger
	// BeforeMessage is replicate.Config's test hook that holds the stream.
	BeforeMessage func(typ byte)
}

// Sidecar is a running server: indexes, replication, pgwire and metrics.
type Sidecar struct {
	Indexer    *indexer.Indexer
	Replicator *replicate.Replicator
	Server     *rpc.Server
	Addr       net.Addr // where pgwire listens

	errs    chan error
	ctx     context.Context
	cancel  context.CancelFunc
	running int
	log     *slog.Logger
}

// Start checks cfg, starts every part and returns; Wait or Stop ends it.
func Start(parent context.Context, cfg Config) (*Sidecar, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ix := indexer.NewWithLimits(cfg.Searches)
	for _, def := range cfg.Indexes {
		spec, err := indexer.ParseSpec(def)
		if err != nil {
			return nil, err
		}
		if _, err := ix.Add(spec); err != nil {
			return nil, err
		}
	}
	rcfg := replicate.Config{
		Source: cfg.Source, Name: cfg.Name, Entries: ix.Entries(), DataDir: cfg.DataDir,
		OnSlotLost: cfg.OnSlotLost, ReceiveTimeout: cfg.ReceiveTimeout, ReportHealth: ix.SetSourceHealth, Logger: log,
		ReportSource: ix.SetSource, BeforeMessage: cfg.BeforeMessage,
	}
	if cfg.DataDir != "" {
		rcfg.Durable = ix.Covered
	}
	rep, err := replicate.New(rcfg)
	if err != nil {
		return nil, err
	}
	extra := func(w io.Writer) {
		writeReplication(w, rep.Stats())
		writeSearchLoad(w, ix.SearchLoad())
	}
	srv, err := rpc.NewServer(rpc.Config{Catalog: ix, Auth: cfg.Auth, Users: cfg.Users, TLS: cfg.TLS, TLSRequired: cfg.TLSRequired,
		AdminUser: cfg.AdminUser, Limits: cfg.Clients, Logger: log, ExtraMetrics: extra, MetricsToken: cfg.MetricsToken})
	if err != nil {
		return nil, err
	}
	checkFileLimit(log, cfg.Clients)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if cfg.Auth == rpc.AuthTrust && !isLoopback(ln.Addr()) {
		log.Warn("--auth trust lets in anyone who reaches --listen, which is not loopback: every vector and key can be read; use scram-sha-256", "listen", ln.Addr().String())
	}
	ctx, cancel := context.WithCancel(parent)
	sc := &Sidecar{Indexer: ix, Replicator: rep, Server: srv, Addr: ln.Addr(), errs: make(chan error, 4), ctx: ctx, cancel: cancel, log: log}
	sc.goRun("replication", func() error { return rep.Run(ctx) })
	sc.goRun("pgwire", func() error { return srv.Serve(ctx, ln) })
	if cfg.DataDir != "" {
		sc.goRun("checkpoints", func() error {
			return ix.RunCheckpoints(ctx, indexer.CheckpointPolicy{
				Dir: cfg.DataDir, Interval: cfg.CheckpointInterval, Changes: cfg.CheckpointChanges,
				Source: rep.Source, Logger: log,
			})
		})
	}
	if cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
		if cfg.MetricsToken == "" && !isLoopback(mln.Addr()) {
			log.Warn("/metrics is open to anyone who reaches --metrics-listen, and names every index: set --metrics-token-file, or listen on loopback", "metrics_listen", mln.Addr().String())
		}
		if cfg.MetricsTLS != nil {
			mln = tls.NewListener(mln, cfg.MetricsTLS)
		}
		hs := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		sc.goRun("metrics", func() error {
			go func() { <-ctx.Done(); hs.Close() }()
			if err := hs.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	log.Info("vecside serving", "listen", ln.Addr().String(), "metrics", cfg.MetricsListen, "indexes", len(cfg.Indexes))
	return sc, nil
}

func (sc *Sidecar) goRun(name string, fn func() error) {
	sc.running++
	go func() {
		err := fn()
		switch {
		case err != nil:
			err = fmt.Errorf("%s: %w", name, err)
		case sc.ctx.Err() == nil:
			// Every part runs until the sidecar stops: one that ends on its
			// own is a bug, and must not pass for a clean shutdown.
			err = fmt.Errorf("%s ended on its own", name)
		}
		sc.errs <- err
	}()
}

// Wait blocks until every part has stopped; the first failure stops the
// others.
func (sc *Sidecar) Wait() error {
	var first error
	for ; sc.running > 0; sc.running-- {
		if err := <-sc.errs; err != nil && first == nil {
			first = err
			sc.log.Error("stopping", "err", err)
		}
		sc.cancel()
	}
	if first == nil {
		sc.log.Info("stopped")
	}
	return first
}

// Stop shuts the sidecar down and waits for it.
func (sc *Sidecar) Stop() error {
	sc.cancel()
	return sc.Wait()
}

// isLoopback says whether addr is a loopback address or a Unix socket:
// only this machine can reach it.
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// checkFileLimit warns if the process may open fewer files than the
// clients can hold: accepting then fails (it is retried, but clients
// wait), and so may checkpoints and the replication connection.
func checkFileLimit(log *slog.Logger, l rpc.Limits) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	d := rpc.DefaultLimits
	need := uint64(cmp.Or(l.MaxConnections, d.MaxConnections) + cmp.Or(l.MaxStartups, d.MaxStartups) + filesReserved)
	if lim.Cur < need {
		log.Warn("the open file limit is below what clients may hold: raise it (ulimit -n, LimitNOFILE=) or lower --max-connections", "limit", lim.Cur, "needed", need)
	}
}

// filesReserved is what the process needs besides client connections:
// replication and copy connections, checkpoint files, listeners.
const filesReserved = 64

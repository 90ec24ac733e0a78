// Package sidecar assembles a running vecside from its parts: the set of
// indexes, the replicator that feeds them, the pgwire server that answers
// from them, and the HTTP listeners for metrics and probes. The serve and
// demo commands and the end-to-end tests all start it the same way.
//
// The parts keep stats structs of their own (replicate.Stats,
// indexer.Status and SearchLoad, rpc.Stats); metrics.go turns them into
// Prometheus series at each scrape, beside the client library's process
// and Go runtime collectors, so that nothing is counted twice and no part
// depends on a metrics library. The figures an index kind declares
// (kind.Figure) become series vecside_index_<figure> of its indexes,
// read from the kind registry, so that a kind adds series with no change
// here. docs/operations.md lists every series; a test keeps that list
// complete, and another that every kind's figures show.
//
// Probes (http.go): /healthz answers 200 while the process serves HTTP
// (liveness: a wedged process stops answering); /readyz answers 200 once
// every index has finished its first copy and at least one serves
// (readiness). An index in error leaves the others serving and shows in
// vecside_status() and vecside_index_state, unless ReadyRequiresAll. The
// probes name no index or table, so they may listen on an address of
// their own (ProbesListen) that a kubelet reaches while /metrics stays on
// loopback.
package sidecar

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/replicate/declared"
	"github.com/vecside/vecside/rpc"
)

// Config says what to follow and where to serve; the serve command's flags
// document each field.
type Config struct {
	Source string // libpq connection string or URL
	Name   string // publication and slot
	Listen string // pgwire address; port 0 picks a free one
	// UnixSocketDir, if set, is a directory where pgwire also listens on
	// a Unix socket, .s.PGSQL.<Listen's port>, as PostgreSQL names its
	// own: libpq clients reach it with host=<dir>. It has startup slots of
	// its own, so the admin can log in there while a flood fills the TCP
	// listener's.
	UnixSocketDir string
	MetricsListen string // /metrics, /healthz and /readyz address; empty disables
	ProbesListen  string // /healthz and /readyz only; empty disables
	// ReadyRequiresAll keeps /readyz at 503 while any index is in error.
	ReadyRequiresAll bool
	Auth             string // client authentication method
	Users            *rpc.Users
	TLS              *tls.Config // pgwire TLS, if any
	TLSRequired      bool
	MetricsTLS       *tls.Config // HTTPS for the metrics and probes listeners, if set
	Indexes          []string    // --index definitions
	// Discovery serves the indexes the database declares too.
	Discovery  Discovery
	OnSlotLost string // fail or resync
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
	// CopyProgress, if set, receives the progress of table copies (see
	// replicate.Config); nil logs it.
	CopyProgress func(replicate.CopyProgress)
	// BeforeCopy, if set, runs before each copy starts (a test hook).
	BeforeCopy func()
	// BeforeMessage is replicate.Config's test hook that holds the stream.
	BeforeMessage func(typ byte)
	Logger        *slog.Logger
}

// Sidecar is a running server: indexes, replication, pgwire and metrics.
type Sidecar struct {
	Indexer    *indexer.Indexer
	Replicator *replicate.Replicator
	Server     *rpc.Server
	Addr       net.Addr // where pgwire listens
	UnixSocket string   // the path of its Unix socket, if any
	// MetricsAddr and ProbesAddr are where the HTTP listeners are, nil
	// for those disabled.
	MetricsAddr, ProbesAddr net.Addr

	cfg      Config
	registry *prometheus.Registry // what /metrics serves
	errs     chan error
	ctx      context.Context
	cancel   context.CancelFunc
	running  int
	log      *slog.Logger
}

// Start checks cfg, starts every part and returns; Wait or Stop ends it.
func Start(parent context.Context, cfg Config) (*Sidecar, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ix := indexer.NewWithLimits(cfg.Searches)
	var flags []indexer.Spec
	for _, def := range cfg.Indexes {
		spec, err := indexer.ParseSpec(def)
		if err != nil {
			return nil, err
		}
		if _, err := ix.Add(spec); err != nil {
			return nil, err
		}
		flags = append(flags, spec)
	}
	follow, err := startDiscovery(parent, cfg, ix, flags, log)
	if err != nil {
		return nil, err
	}
	rcfg := replicate.Config{
		Source: cfg.Source, Name: cfg.Name, Entries: ix.Entries(), DataDir: cfg.DataDir,
		OnSlotLost: cfg.OnSlotLost, ReceiveTimeout: cfg.ReceiveTimeout, ReportHealth: ix.SetSourceHealth,
		CopyProgress: cfg.CopyProgress, BeforeCopy: cfg.BeforeCopy, Logger: log,
		ReportSource: ix.SetSource, BeforeMessage: cfg.BeforeMessage,
	}
	if cfg.DataDir != "" {
		rcfg.Durable = ix.Covered
	}
	rep, err := replicate.New(rcfg)
	if err != nil {
		return nil, err
	}
	mock, err := mockAuthSecret(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// Prompt: every kind's search gives up once its context ends
	// (indexer/kindtest), and the indexer's waits select on it.
	srv, err := rpc.NewServer(rpc.Config{Catalog: ix, PromptCatalog: true, Auth: cfg.Auth, Users: cfg.Users, MockAuthSecret: mock, TLS: cfg.TLS, TLSRequired: cfg.TLSRequired,
		AdminUser: cfg.AdminUser, Limits: cfg.Clients, Logger: log})
	if err != nil {
		return nil, err
	}
	checkFileLimit(log, cfg.Clients)
	ls, err := openListeners(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Auth == rpc.AuthTrust && !isLoopback(ls.pgwire.Addr()) {
		log.Warn("--auth trust lets in anyone who reaches --listen, which is not loopback: every vector and key can be read; use scram-sha-256", "listen", ls.pgwire.Addr().String())
	}
	if ls.metrics != nil && cfg.MetricsToken == "" && !isLoopback(ls.metrics.Addr()) {
		log.Warn("/metrics is open to anyone who reaches --metrics-listen, and names every index: set --metrics-token-file, listen on loopback, and give probes their own --probes-listen", "metrics_listen", ls.metrics.Addr().String())
	}
	ctx, cancel := context.WithCancel(parent)
	sc := &Sidecar{Indexer: ix, Replicator: rep, Server: srv, Addr: ls.pgwire.Addr(), cfg: cfg, errs: make(chan error, 8), ctx: ctx, cancel: cancel, log: log}
	sc.registry = newRegistry(sc)
	sc.goRun("replication", func() error { return rep.Run(ctx) })
	if follow != nil {
		follow.add, follow.remove = rep.Add, rep.Remove
		sc.goRun("declared indexes", func() error { return follow.run(ctx, cfg.Source, cfg.Discovery.Interval) })
	}
	sc.goRun("pgwire", func() error { return srv.Serve(ctx, ls.pgwire) })
	if ls.unix != nil {
		sc.UnixSocket = ls.unix.Addr().String()
		sc.goRun("pgwire-unix", func() error { return srv.Serve(ctx, ls.unix) })
	}
	if cfg.DataDir != "" {
		sc.goRun("checkpoints", func() error {
			return ix.RunCheckpoints(ctx, indexer.CheckpointPolicy{
				Dir: cfg.DataDir, Interval: cfg.CheckpointInterval, Changes: cfg.CheckpointChanges,
				Source: rep.Source, Logger: log,
			})
		})
	}
	if ls.metrics != nil {
		sc.MetricsAddr = ls.metrics.Addr()
		sc.serveHTTP("metrics", ls.metrics, sc.metricsHandler(sc.registry, cfg.MetricsToken))
	}
	if ls.probes != nil {
		sc.ProbesAddr = ls.probes.Addr()
		sc.serveHTTP("probes", ls.probes, sc.probesHandler())
	}
	log.Info("vecside serving", "listen", sc.Addr.String(), "metrics", addrText(sc.MetricsAddr), "probes", addrText(sc.ProbesAddr), "indexes", len(cfg.Indexes))
	return sc, nil
}

// startDiscovery reads the indexes the database declares, when cfg says
// to, and adds them to ix before the replicator starts; the follower it
// returns (nil when discovery is off) keeps them up to date. A database
// that cannot be read now is not an error: the follower tries again.
func startDiscovery(ctx context.Context, cfg Config, ix *indexer.Indexer, flags []indexer.Spec, log *slog.Logger) (*follower, error) {
	on, err := cfg.Discovery.Enabled(len(flags))
	if err != nil || !on {
		return nil, err
	}
	filter, err := declared.ParseFilter(cfg.Discovery.Tables)
	if err != nil {
		return nil, err
	}
	if cfg.Discovery.Interval <= 0 {
		cfg.Discovery.Interval = 5 * time.Second
	}
	f := &follower{ix: ix, flags: flags, filter: filter, dataDir: cfg.DataDir, served: map[string]string{},
		log: log.With("subsystem", "declared"), add: func(*indexer.Entry) {}, remove: func(*indexer.Entry) {}}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, cfg.Source)
	if err == nil {
		err = f.sync(qctx, conn)
		conn.Close(context.Background())
	}
	switch {
	case err != nil:
		f.log.Warn("reading the declared indexes failed; retrying", "err", err)
	case len(ix.Entries()) == 0:
		f.log.Warn("no index declared yet: serving each pgvector index (hnsw, ivfflat) and each column commented 'vecside: metric=…' as they appear")
	}
	return f, nil
}

// Register adds c's series to those /metrics serves, as vecside serve
// --proxy adds its proxy's.
func (sc *Sidecar) Register(c prometheus.Collector) error { return sc.registry.Register(c) }

// listeners are the sidecar's sockets, all opened before anything runs
// so that an address in use fails Start cleanly.
type listeners struct {
	pgwire, unix, metrics, probes net.Listener
}

func openListeners(cfg Config) (ls listeners, err error) {
	defer func() {
		if err != nil {
			for _, ln := range []net.Listener{ls.pgwire, ls.unix, ls.metrics, ls.probes} {
				if ln != nil {
					ln.Close()
				}
			}
		}
	}()
	if ls.pgwire, err = listen("listen", cfg.Listen); err != nil {
		return ls, err
	}
	if cfg.UnixSocketDir != "" {
		if ls.unix, err = listenUnix(cfg.UnixSocketDir, ls.pgwire.Addr()); err != nil {
			return ls, err
		}
	}
	for _, l := range []struct {
		flag, addr string
		ln         *net.Listener
	}{{"metrics-listen", cfg.MetricsListen, &ls.metrics}, {"probes-listen", cfg.ProbesListen, &ls.probes}} {
		if l.addr == "" {
			continue
		}
		ln, err := listen(l.flag, l.addr)
		if err != nil {
			return ls, err
		}
		if cfg.MetricsTLS != nil {
			ln = tls.NewListener(ln, cfg.MetricsTLS)
		}
		*l.ln = ln
	}
	return ls, nil
}

// mockAuthSecret is the secret of the salts unknown users are shown (see
// rpc.Config.MockAuthSecret), kept in the data directory so that it
// outlives restarts; none without a data directory. A file of the wrong
// size (a write cut short) is replaced.
func mockAuthSecret(dir string) ([]byte, error) {
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, "mock_auth_secret")
	if b, err := os.ReadFile(path); err == nil && len(b) == mockSecretLen {
		return b, nil
	}
	b := make([]byte, mockSecretLen)
	rand.Read(b)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	return b, nil
}

const mockSecretLen = 32

// listenUnix listens on dir/.s.PGSQL.<port of tcp>, readable and
// writable by the sidecar's user and group only. A socket file left by a
// sidecar that did not stop cleanly is replaced: the TCP listener on the
// same port is already this process's, so no other sidecar uses it.
func listenUnix(dir string, tcp net.Addr) (net.Listener, error) {
	port := 0
	if a, ok := tcp.(*net.TCPAddr); ok {
		port = a.Port
	}
	path := filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", port))
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--unix-socket-dir: %w", err)
	}
	if err := os.Chmod(path, 0o770); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--unix-socket-dir: %w", err)
	}
	return ln, nil
}

// serveHTTP serves h on ln until the sidecar stops.
func (sc *Sidecar) serveHTTP(name string, ln net.Listener, h http.Handler) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	sc.goRun(name, func() error {
		go func() { <-sc.ctx.Done(); hs.Close() }()
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
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

// WaitReady waits until index e is ready, and fails at once if it is in
// error, or after timeout.
func WaitReady(ctx context.Context, e *indexer.Entry, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		state, msg := e.State()
		switch {
		case state == indexer.StateReady:
			return nil
		case state == indexer.StateError:
			return fmt.Errorf("index %s: %s", e.Spec().Name, msg)
		case time.Now().After(deadline) && msg != "":
			return fmt.Errorf("index %s not ready after %s: %s: %s", e.Spec().Name, timeout, state, msg)
		case time.Now().After(deadline):
			return fmt.Errorf("index %s not ready after %s", e.Spec().Name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TeardownWait is how long a teardown (replicate.Teardown) waits for a
// sidecar that has just stopped to release its slot: its walsender
// notices a moment later.
const TeardownWait = 5 * time.Second

// Stop shuts the sidecar down and waits for it.
func (sc *Sidecar) Stop() error {
	sc.Shutdown()
	return sc.Wait()
}

// Shutdown asks the sidecar to stop and returns; Wait returns once it
// has. Only one goroutine may Wait.
func (sc *Sidecar) Shutdown() { sc.cancel() }

// addrText is where a listener is, or "off".
func addrText(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
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

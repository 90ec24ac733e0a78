package rpc

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
)

// Catalog is what the server needs from the indexes; *indexer.Indexer
// provides it.
type Catalog interface {
	Search(ctx context.Context, name string, q []float32, k int, opts indexer.SearchOptions) (indexer.Result, error)
	Status() []indexer.Status
	KeyType(name string) (pgvalue.KeyType, error)
	SourceHealth() indexer.SourceHealth
}

// Config configures a Server.
type Config struct {
	// Catalog answers searches and status queries. Required.
	Catalog Catalog
	// Auth is how clients authenticate. Only "trust" (no password) exists
	// yet; it must be asked for explicitly.
	Auth string
	// Logger receives connection errors and panics; nil discards them.
	Logger *slog.Logger
	// MaxConnections bounds the open client connections; 0 means 256.
	MaxConnections int
	// Version is vecside's version, shown by SELECT version().
	Version string
	// ExtraMetrics, if set, appends the metrics of other parts of the
	// server (in the Prometheus text format) to /metrics.
	ExtraMetrics func(w io.Writer)
}

// DefaultMaxConnections is used when Config.MaxConnections is 0.
const DefaultMaxConnections = 256

// Server answers the PostgreSQL wire protocol in front of a Catalog.
type Server struct {
	cfg     Config
	auth    authenticator
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	conns   map[uint32]*conn // by process ID, for CancelRequest
	nextPID uint32

	// cancelSlots bounds the CancelRequests being checked at once; with
	// the pause after a wrong key it bounds how fast keys can be guessed.
	cancelSlots chan struct{}
}

// NewServer checks cfg and returns a server ready to Serve.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("rpc: Config.Catalog is required")
	}
	auth, err := newAuthenticator(cfg.Auth)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxConnections < 0 {
		return nil, fmt.Errorf("rpc: Config.MaxConnections is %d; want a positive number, or 0 for %d", cfg.MaxConnections, DefaultMaxConnections)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:         cfg,
		auth:        auth,
		log:         cfg.Logger,
		metrics:     newMetrics(),
		conns:       map[uint32]*conn{},
		cancelSlots: make(chan struct{}, 16),
	}, nil
}

// Serve accepts connections on ln until ctx ends, then closes ln and every
// connection and returns nil once they have all finished. It returns an
// error if accepting fails for another reason.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("rpc: accept: %w", err)
		}
		backoff = 0
		wg.Go(func() { s.serveConn(ctx, nc) })
	}
}

// register gives c a process ID, unless the server is full.
func (s *Server) register(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) >= s.cfg.MaxConnections {
		return &pgError{code: codeTooManyConnections, msg: fmt.Sprintf("sorry, too many clients already (%d)", s.cfg.MaxConnections), fatal: true}
	}
	for {
		s.nextPID++
		if _, taken := s.conns[s.nextPID]; !taken && s.nextPID != 0 {
			break
		}
	}
	c.pid = s.nextPID
	s.conns[c.pid] = c
	s.metrics.connections.Add(1)
	return nil
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.pid] == c {
		delete(s.conns, c.pid)
		s.metrics.connections.Add(-1)
	}
}

// cancel handles a CancelRequest: if the key matches, the connection's
// running request is cancelled. Nothing is answered either way.
func (s *Server) cancel(pid uint32, secret []byte) {
	select {
	case s.cancelSlots <- struct{}{}:
		defer func() { <-s.cancelSlots }()
	default:
		s.log.Warn("cancel request dropped: too many at once")
		return
	}
	s.mu.Lock()
	c := s.conns[pid]
	s.mu.Unlock()
	if c != nil && subtle.ConstantTimeCompare(c.secret[:], secret) == 1 {
		c.cancelRequest()
		return
	}
	s.log.Warn("cancel request with a wrong key", "pid", pid)
	time.Sleep(100 * time.Millisecond)
}

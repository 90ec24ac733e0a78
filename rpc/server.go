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
	// AdminUser may use the Limits.ReservedConnections sessions that
	// others may not; empty reserves none.
	AdminUser string
	// Limits bound what clients can hold; zero fields take DefaultLimits.
	Limits Limits
	// Logger receives connection errors and panics; nil discards them.
	Logger *slog.Logger
	// Version is vecside's version, shown by SELECT version().
	Version string
	// ExtraMetrics, if set, appends the metrics of other parts of the
	// server (in the Prometheus text format) to /metrics.
	ExtraMetrics func(w io.Writer)
	// MetricsToken, if set, is the bearer token /metrics asks for.
	MetricsToken string
}

// Server answers the PostgreSQL wire protocol in front of a Catalog.
type Server struct {
	cfg     Config
	limits  Limits
	auth    authenticator
	log     *slog.Logger
	metrics *metrics
	faults  *faults

	// startups holds a slot for every connection in startup or
	// authentication, at most Limits.MaxStartups.
	startups chan struct{}

	mu      sync.Mutex
	conns   map[uint32]*conn // sessions, by process ID, for CancelRequest
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
	limits, err := cfg.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.AdminUser == "" {
		limits.ReservedConnections = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:         cfg,
		limits:      limits,
		auth:        auth,
		log:         cfg.Logger,
		metrics:     newMetrics(),
		faults:      newFaults(cfg.Logger),
		startups:    make(chan struct{}, limits.MaxStartups),
		conns:       map[uint32]*conn{},
		cancelSlots: make(chan struct{}, 16),
	}, nil
}

// Serve accepts connections on ln until ctx ends, then closes ln and every
// connection and returns nil once they have all finished. Accepting that
// fails (no file descriptors left, a connection reset before it was
// accepted) is retried with a growing pause, up to a second: only a
// listener closed by someone else ends Serve early, with an error.
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
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("rpc: accept: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.faults.add(faultAccept, "accepting a connection failed; retrying", "err", err, "pause", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		select {
		case s.startups <- struct{}{}:
			wg.Go(func() { s.serveConn(ctx, nc) })
		default:
			s.refuse(nc)
		}
	}
}

// refuse turns away a connection that would exceed Limits.MaxStartups,
// before reading anything from it, as PostgreSQL's postmaster does when
// it has no room: the error fits in the new socket's send buffer, so
// writing it does not wait for the client.
func (s *Server) refuse(nc net.Conn) {
	defer nc.Close()
	s.faults.add(faultTooManyStartups, "connection refused: too many connections authenticating", "remote", nc.RemoteAddr().String(), "max_startups", s.limits.MaxStartups)
	e := &pgError{code: codeTooManyConnections, msg: fmt.Sprintf("sorry, too many clients already: %d connections are authenticating", s.limits.MaxStartups), fatal: true}
	buf, _ := e.message().Encode(nil)
	nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	nc.Write(buf)
}

// register gives c a process ID, unless the server is full for c's user.
func (s *Server) register(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	admin := s.cfg.AdminUser != "" && c.sess.user == s.cfg.AdminUser
	limit := s.limits.MaxConnections
	if !admin {
		limit -= s.limits.ReservedConnections
	}
	if len(s.conns) >= limit {
		msg := fmt.Sprintf("sorry, too many clients already (%d)", s.limits.MaxConnections)
		if len(s.conns) < s.limits.MaxConnections {
			msg = "remaining connection slots are reserved for the admin user"
		}
		s.faults.add(faultTooManySessions, "connection refused: too many sessions", "user", c.sess.user, "max_connections", s.limits.MaxConnections)
		return &pgError{code: codeTooManyConnections, msg: msg, fatal: true}
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
		s.faults.add(faultCancelDropped, "cancel request dropped: too many at once")
		return
	}
	s.mu.Lock()
	c := s.conns[pid]
	s.mu.Unlock()
	if c != nil && subtle.ConstantTimeCompare(c.secret[:], secret) == 1 {
		c.cancelRequest()
		return
	}
	s.faults.add(faultBadCancel, "cancel request with a wrong key", "pid", pid)
	time.Sleep(100 * time.Millisecond)
}

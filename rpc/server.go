package rpc

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/internal/pgvalue"
	"github.com/vecside/vecside/rpc/internal/pgstartup"
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
	// PromptCatalog says that the Catalog's calls return soon after their
	// context ends (its searches check it, its waits select on it). The
	// server then makes each call on the connection's own goroutine,
	// which saves a hand-off between threads per search; otherwise each
	// call runs on a goroutine of its own, and the client is answered at
	// the deadline even if the call goes on.
	PromptCatalog bool
	// Auth is how clients authenticate: AuthSCRAM (the default), with
	// the verifiers of Users, or AuthTrust (no password), which must be
	// asked for explicitly.
	Auth  string
	Users *Users
	// MockAuthSecret derives the salts an unknown user is shown, so that
	// the exchange looks like a real user's. Keep it across restarts (as
	// PostgreSQL keeps its mock nonce): a salt that changes at a restart
	// while real users' stay the same tells which users exist. Empty
	// takes a random one for the life of the process.
	MockAuthSecret []byte
	// TLS, if set, encrypts connections whose client asks (an SSLRequest);
	// TLSRequired refuses the others, but for CancelRequests, which
	// libpq before 17 and pgx send unencrypted. With a certificate in
	// TLS.Certificates, SCRAM-SHA-256-PLUS binds authentication to it.
	TLS         *tls.Config
	TLSRequired bool
	// AdminUser may use the Limits.ReservedConnections sessions that
	// others may not; empty reserves none.
	AdminUser string
	// Limits bound what clients can hold; zero fields take DefaultLimits.
	Limits Limits
	// Logger receives connection errors and panics; nil discards them.
	Logger *slog.Logger
	// Version is vecside's version, shown by SELECT version(); empty
	// takes the main module's version from the build.
	Version string
}

// Server answers the PostgreSQL wire protocol in front of a Catalog.
type Server struct {
	cfg     Config
	limits  Limits
	auth    authenticator
	log     *slog.Logger
	metrics *metrics
	faults  *faults

	tls      *tls.Config
	endpoint []byte // tls-server-end-point data of the certificate, or nil

	mu      sync.Mutex
	conns   map[uint32]*conn // sessions, by process ID, for CancelRequest
	users   map[string]int   // sessions per user
	nextPID uint32

	// cancelSlots bounds the CancelRequests being checked at once; with
	// the pause after a wrong key it bounds how fast keys can be guessed.
	cancelSlots chan struct{}
	cancelPause time.Duration
}

// wrongCancelPause is how long a CancelRequest with a wrong key holds its
// slot: with 16 slots, at most 160 guesses a second.
const wrongCancelPause = 100 * time.Millisecond

// NewServer checks cfg and returns a server ready to Serve.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("rpc: Config.Catalog is required")
	}
	auth, err := newAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.TLSRequired && cfg.TLS == nil {
		return nil, errors.New("rpc: Config.TLSRequired needs Config.TLS")
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
	srv := &Server{
		cfg:         cfg,
		limits:      limits,
		auth:        auth,
		log:         cfg.Logger,
		metrics:     newMetrics(),
		faults:      newFaults(cfg.Logger),
		conns:       map[uint32]*conn{},
		users:       map[string]int{},
		cancelSlots: make(chan struct{}, 16),
		cancelPause: wrongCancelPause,
	}
	if cfg.TLS != nil {
		srv.tls = cfg.TLS.Clone()
		srv.tls.MinVersion = max(srv.tls.MinVersion, tls.VersionTLS12)
		srv.tls.NextProtos = []string{"postgresql"}
		if srv.endpoint, err = endpointHash(srv.tls); err != nil {
			cfg.Logger.Warn("SCRAM-SHA-256-PLUS is not offered: no channel binding for the certificate", "err", err)
		}
	}
	return srv, nil
}

// version is what SELECT version() says: the PostgreSQL version whose
// protocol is spoken first, for tools that parse it, then what this is.
func (s *Server) version() string {
	v := s.cfg.Version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("PostgreSQL %s (vecside %s, a vector-search sidecar: knn() and vecside_status() only; %s, %s/%s)",
		serverVersion, v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// endpointHash is the tls-server-end-point channel binding data (RFC
// 5929) of the configuration's certificate: its hash with the hash
// function of its signature, SHA-256 if that is MD5 or SHA-1.
func endpointHash(cfg *tls.Config) ([]byte, error) {
	if len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return nil, errors.New("the certificate is chosen per connection")
	}
	cert, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		return nil, err
	}
	var h hash.Hash
	switch cert.SignatureAlgorithm {
	case x509.MD5WithRSA, x509.SHA1WithRSA, x509.ECDSAWithSHA1, x509.SHA256WithRSA, x509.SHA256WithRSAPSS, x509.ECDSAWithSHA256:
		h = sha256.New()
	case x509.SHA384WithRSA, x509.SHA384WithRSAPSS, x509.ECDSAWithSHA384:
		h = sha512.New384()
	case x509.SHA512WithRSA, x509.SHA512WithRSAPSS, x509.ECDSAWithSHA512:
		h = sha512.New()
	default:
		return nil, fmt.Errorf("tls-server-end-point is undefined for signature algorithm %v", cert.SignatureAlgorithm)
	}
	h.Write(cert.Raw)
	return h.Sum(nil), nil
}

// Serve accepts connections on ln until ctx ends, then closes ln and every
// connection and returns nil once they have all finished. A server may
// serve several listeners at once (TCP and a Unix socket): each has
// startup slots of its own, so that a flood on one leaves the others'
// logins alone. Accepting that
// fails (no file descriptors left, a connection reset before it was
// accepted) is retried with a growing pause, up to a second: only a
// listener closed by someone else ends Serve early, with an error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	l := &pgstartup.Listener{
		Admission: pgstartup.NewAdmission(s.limits.MaxStartups, s.limits.MaxStartupsPerPeer, 0),
		ServeConn: s.serveConn,
		Evicted:   s.evict,
		Refused: func(nc net.Conn) {
			s.faults.add(faultTooManyStartups, "connection refused: too many connections authenticating", "remote", nc.RemoteAddr().String(), "max_startups", s.limits.MaxStartups)
			refuse(nc, fmt.Sprintf("sorry, too many clients already: %d connections are authenticating", s.limits.MaxStartups))
		},
		AcceptFailed: func(err error, pause time.Duration) {
			s.faults.add(faultAccept, "accepting a connection failed; retrying", "err", err, "pause", pause)
		},
	}
	if err := l.Serve(ctx, ln); err != nil {
		return fmt.Errorf("rpc: accept: %w", err)
	}
	return nil
}

// evict closes a connection whose startup slot went to a newer one. One
// that has sent nothing whole is told why; past an SSLRequest, its own
// goroutine may be writing, through TLS, so it is only closed.
func (s *Server) evict(st *pgstartup.Startup) {
	s.faults.add(faultStartupEvicted, "connection closed: its startup slot went to a new connection", "remote", st.Conn.RemoteAddr().String(), "max_startups", s.limits.MaxStartups)
	if st.Stage() == pgstartup.Connected {
		refuse(st.Conn, "sorry, too many clients already: this connection sent nothing while others waited to start up")
		return
	}
	st.Conn.Close()
}

// refuse closes a connection in startup with FATAL 53300, as PostgreSQL's
// postmaster does when it has no room. Nothing was read from a new
// connection, and one that is evicted has been sent at most a few bytes:
// the error fits in the socket's send buffer, so writing it does not
// wait for the client.
func refuse(nc net.Conn, msg string) {
	defer nc.Close()
	e := &pgError{code: codeTooManyConnections, msg: msg, fatal: true}
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
		if n := s.limits.MaxUserConnections; n > 0 && s.users[c.sess.user] >= n {
			s.faults.add(faultTooManySessions, "connection refused: too many sessions of one user", "user", c.sess.user, "max_user_connections", n)
			return &pgError{code: codeTooManyConnections, msg: fmt.Sprintf("too many connections for user %q (%d)", c.sess.user, n), fatal: true}
		}
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
	s.users[c.sess.user]++
	s.metrics.connections.Add(1)
	return nil
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.pid] == c {
		delete(s.conns, c.pid)
		if s.users[c.sess.user]--; s.users[c.sess.user] == 0 {
			delete(s.users, c.sess.user)
		}
		s.metrics.connections.Add(-1)
	}
}

// cancel handles a CancelRequest that came on nc: if the key matches, the
// connection's running request is cancelled. Nothing is answered either
// way, and nc is closed at once: a client waits for that, so the pause
// after a wrong key holds a cancel slot, not the client.
func (s *Server) cancel(nc net.Conn, pid uint32, secret []byte) {
	defer nc.Close()
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
	nc.Close()
	time.Sleep(s.cancelPause)
}

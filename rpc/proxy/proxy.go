//go:build cgo

package proxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/rpc/internal/pgstartup"
)

// Config says where the proxy forwards and whom it asks for candidates.
type Config struct {
	// Upstream is where PostgreSQL is: a libpq connection string or URL
	// (its hosts and ports, tried in turn, sslmode, sslrootcert,
	// sslcert and sslkey; the user, database and password are each
	// client's own), host:port, or a Unix socket's path
	// (/var/run/postgresql/.s.PGSQL.5432). Without sslmode the proxy does
	// not ask for TLS (libpq's default, prefer, would): a client's SCRAM
	// channel binding fails across TLS on both sides, see doc.go.
	Upstream string
	// ClientTLS, if not nil, is offered to clients that ask (an
	// SSLRequest), with its certificate; ClientTLSRequired refuses those
	// that do not (28000), as a hostssl line of pg_hba.conf would.
	ClientTLS         *tls.Config
	ClientTLSRequired bool
	// Sidecar, if not nil, answers the statements the proxy accelerates
	// (Remote or InProcess); nil passes everything through. Its indexes
	// are asked again every StatusInterval (DefaultStatusInterval if 0):
	// which tables and columns are indexed, by which index, with which
	// metric and key, and whether the index is ready.
	Sidecar        Sidecar
	StatusInterval time.Duration
	// CandidateWait bounds how long a statement waits for the sidecar's
	// candidates, read-your-writes wait included
	// (DefaultCandidateWait if 0): past it, the statement passes through.
	CandidateWait time.Duration
	Limits        Limits
	Logger        *slog.Logger
}

// ClientConfig is how a client of the server dsn names connects through
// a proxy listening at addr (host:port) instead: the same database, role
// and password.
func ClientConfig(dsn, addr string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("proxy address %s: %w", addr, err)
	}
	cfg.Host, cfg.Port, cfg.Fallbacks = host, uint16(p), nil
	return cfg, nil
}

// DefaultCandidateWait is how long a statement waits for candidates,
// when Config.CandidateWait is 0: a search takes a few milliseconds, a
// sidecar catching up on a burst of writes a few more; a statement that
// would wait longer is sooner answered by PostgreSQL itself.
const DefaultCandidateWait = 50 * time.Millisecond

// DefaultStatusInterval is how often the proxy asks the sidecar what it
// indexes, when Config.StatusInterval is 0.
const DefaultStatusInterval = 2 * time.Second

// Limits bound what clients can make the proxy hold. Zero fields take
// DefaultLimits'.
type Limits struct {
	// MaxConnections bounds the sessions: a client that has sent its
	// StartupMessage takes one until it ends, and with it one upstream
	// connection; past it a new one is refused with FATAL 53300.
	MaxConnections int
	// MaxStartups bounds the connections that have not yet sent their
	// StartupMessage (or are authenticating), on top of MaxConnections,
	// as rpc's do (pgstartup.Admission): one that has sent nothing gives
	// its slot to a newer one, the longest waiting first, from the same
	// address first past MaxStartupsPerPeer; only when every slot is
	// authenticating is a new connection refused with FATAL 53300. So a
	// flood of silent connections holds neither sessions nor upstream
	// connections, and keeps no client out for long.
	MaxStartups        int
	MaxStartupsPerPeer int
	// MaxAuthenticatingPerPeer bounds the connections of one address
	// that authenticate at a time, each with its upstream connection and
	// session slot: the others wait their turn, without either, until
	// AuthTimeout. So clients that never answer PostgreSQL's password
	// request hold that many backends, however many they are and however
	// fast they reconnect, and other addresses still log in.
	MaxAuthenticatingPerPeer int
	// AuthTimeout bounds the time from accepting a connection to the end
	// of its authentication; past it both connections are closed.
	AuthTimeout time.Duration
	// MaxMessage bounds the messages the proxy reads whole to look into
	// (Query, Parse, Bind, and the statement's results it rewrites);
	// larger ones pass through in pieces, unaccelerated.
	MaxMessage int
}

// DefaultLimits are the limits a zero Limits field takes: about 64 KiB of
// buffers per session plus, while a statement is looked into, MaxMessage
// and the rows of one accelerated result.
var DefaultLimits = Limits{MaxConnections: 100, MaxStartups: 256, MaxStartupsPerPeer: 64, MaxAuthenticatingPerPeer: 8, AuthTimeout: 10 * time.Second,
	MaxMessage: 1 << 20}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxConnections <= 0 {
		l.MaxConnections = d.MaxConnections
	}
	if l.MaxStartups <= 0 {
		l.MaxStartups = d.MaxStartups
	}
	if l.MaxStartupsPerPeer <= 0 {
		l.MaxStartupsPerPeer = min(d.MaxStartupsPerPeer, l.MaxStartups)
	}
	if l.MaxAuthenticatingPerPeer <= 0 {
		l.MaxAuthenticatingPerPeer = d.MaxAuthenticatingPerPeer
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = d.AuthTimeout
	}
	if l.MaxMessage <= 0 {
		l.MaxMessage = d.MaxMessage
	}
	return l
}

// Proxy relays PostgreSQL sessions and accelerates what it can prove it
// answers identically.
type Proxy struct {
	cfg       Config
	upstreams []upstream // Config.Upstream's, in the order they are tried
	// stickiness is how long a session's goroutine waits for the
	// client's next message after an answer (defaultStickiness).
	stickiness time.Duration
	limits     Limits
	log        *slog.Logger
	slots      chan struct{} // one per session
	wait       time.Duration // Config.CandidateWait, or its default
	cat        *catalog
	stats      counters
	// parsing is the code of the statements being parsed or answered
	// now (inspect.go).
	parsing atomic.Int64
	// sidecarDown is when statements may ask the sidecar again after it
	// failed (Unix nanoseconds).
	sidecarDown atomic.Int64
	// sidecarTrouble: the sidecar's last answer was a failure of its
	// own, logged once until it answers again.
	sidecarTrouble atomic.Bool
	// loop relays the plain sessions (loop.go); nil: goroutines relay
	// every session.
	loop *loop

	mu       sync.Mutex
	sessions map[uint32]*session // by the process ID the proxy gave the client
}

// New returns a proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	ups, err := parseUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	if cfg.ClientTLSRequired && cfg.ClientTLS == nil {
		return nil, errors.New("proxy: Config.ClientTLSRequired without ClientTLS")
	}
	p := &Proxy{cfg: cfg, upstreams: ups, stickiness: defaultStickiness, limits: cfg.Limits.withDefaults(), log: cfg.Logger, sessions: map[uint32]*session{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.slots = make(chan struct{}, p.limits.MaxConnections)
	if p.wait = cfg.CandidateWait; p.wait <= 0 {
		p.wait = DefaultCandidateWait
	}
	p.cat = &catalog{sidecar: cfg.Sidecar, interval: cfg.StatusInterval}
	if p.cat.interval <= 0 {
		p.cat.interval = DefaultStatusInterval
	}
	return p, nil
}

// Serve accepts connections on ln until ctx ends; it closes ln.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.cfg.Sidecar != nil {
		go p.cat.run(ctx, p.log)
	}
	loop, err := newLoop()
	if err != nil {
		p.log.Warn("proxy: sessions are relayed by goroutines", "err", err)
	}
	if loop != nil {
		p.loop = loop
		defer loop.stop()
	}
	l := &pgstartup.Listener{
		Admission: pgstartup.NewAdmission(p.limits.MaxStartups, p.limits.MaxStartupsPerPeer, p.limits.MaxAuthenticatingPerPeer),
		ServeConn: p.serveConn,
		Evicted: func(st *pgstartup.Startup) {
			p.stats.evicted.Add(1)
			if st.Stage() == pgstartup.Connected {
				go refuse(st.Conn, "53300", "sorry, too many clients already: this connection sent nothing while others waited to start up")
			} else {
				st.Conn.Close()
			}
		},
		Refused: func(nc net.Conn) {
			go refuse(nc, "53300", "sorry, too many clients already: every startup slot is authenticating") // never stalls Accept
		},
		AcceptFailed: func(err error, pause time.Duration) {
			p.log.Warn("proxy: accepting a connection failed; retrying", "err", err, "pause", pause)
		},
	}
	if err := l.Serve(ctx, ln); err != nil {
		return fmt.Errorf("proxy: accept: %w", err)
	}
	return nil
}

// serveConn runs one client connection, which holds a startup slot
// until it is authenticated, and a session slot from its StartupMessage
// to its end.
func (p *Proxy) serveConn(ctx context.Context, st *pgstartup.Startup) {
	nc := st.Conn
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	s, err := p.startup(st)
	st.Release()
	if s != nil {
		defer func() { <-p.slots }()
		defer p.unregister(s)
	}
	if err != nil {
		if s == nil || !s.reported {
			p.log.Debug("proxy: connection ended in startup", "remote", nc.RemoteAddr().String(), "err", err)
		}
		return
	}
	defer s.up.Close()
	stopUp := context.AfterFunc(ctx, func() { s.up.Close() })
	defer stopUp()
	if err := s.run(ctx); err != nil {
		p.log.Debug("proxy: session ended", "remote", nc.RemoteAddr().String(), "err", err)
	}
}

func (p *Proxy) register(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		var b [8]byte
		rand.Read(b[:])
		pid := binary.BigEndian.Uint32(b[:4]) &^ (1 << 31)
		if _, taken := p.sessions[pid]; pid != 0 && !taken {
			s.pid, s.secret = pid, binary.BigEndian.Uint32(b[4:])
			p.sessions[pid] = s
			return
		}
	}
}

func (p *Proxy) unregister(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sessions, s.pid)
}

// cancel relays a CancelRequest for the proxy's key (pid, secret) to the
// upstream backend of that session, with the upstream's key, and ends
// the session's wait for candidates, if it waits. A wrong key is dropped
// after a pause, as slow as PostgreSQL makes guessing.
func (p *Proxy) cancel(pid, secret uint32) {
	p.mu.Lock()
	s := p.sessions[pid]
	p.mu.Unlock()
	if s == nil || subtle.ConstantTimeEq(int32(s.secret), int32(secret)) != 1 {
		p.stats.badCancels.Add(1)
		time.Sleep(time.Second)
		return
	}
	s.asking.interrupt()
	c, err := s.upstream.dial(time.Now().Add(5 * time.Second))
	if err != nil {
		p.log.Warn("proxy: cannot relay a cancel request", "upstream", s.upstream.addr, "err", err)
		return
	}
	defer c.Close()
	msg := binary.BigEndian.AppendUint32(nil, 16)
	msg = binary.BigEndian.AppendUint32(msg, cancelRequestCode)
	msg = binary.BigEndian.AppendUint32(msg, s.upPID)
	msg = binary.BigEndian.AppendUint32(msg, s.upSecret)
	c.Write(msg)
	// PostgreSQL closes the connection once it has signalled the backend.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Read(make([]byte, 1))
}

// Stats counts what the proxy did with the statements it saw.
type Stats struct {
	Sessions uint64 // sessions started
	// Looped counts the sessions the loop relayed (loop.go); the others,
	// over TLS, were relayed by goroutines.
	Looped      uint64
	Accelerated uint64 // statements answered through the sidecar
	// FastPath counts those of them ordered by the sidecar's exact
	// distances where rows were the versions it measured (doc.go).
	FastPath uint64
	// Fallbacks counts statements the proxy recognised but passed
	// through, by reason.
	Fallbacks  map[string]uint64
	BadCancels uint64 // cancel requests with an unknown key
	// Evicted counts connections closed in startup, their slot given
	// to a newer one (Limits.MaxStartups).
	Evicted uint64
	// TurnTimeouts counts connections refused at AuthTimeout while
	// waiting for their address's turn to authenticate
	// (Limits.MaxAuthenticatingPerPeer).
	TurnTimeouts uint64
}

type counters struct {
	sessions, looped, accelerated, fastPath, badCancels, evicted, turnTimeouts atomic.Uint64
	mu                                                                         sync.Mutex
	fallbacks                                                                  map[string]uint64
}

func (c *counters) fallback(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fallbacks == nil {
		c.fallbacks = map[string]uint64{}
	}
	c.fallbacks[reason]++
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	c := &p.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	fb := make(map[string]uint64, len(c.fallbacks))
	for k, v := range c.fallbacks {
		fb[k] = v
	}
	return Stats{Sessions: c.sessions.Load(), Looped: c.looped.Load(), Accelerated: c.accelerated.Load(), FastPath: c.fastPath.Load(), Fallbacks: fb, BadCancels: c.badCancels.Load(),
		Evicted: c.evicted.Load(), TurnTimeouts: c.turnTimeouts.Load()}
}

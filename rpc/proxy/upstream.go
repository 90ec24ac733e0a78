//go:build cgo

package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// An upstream is one way to reach PostgreSQL: an address and the TLS to
// ask for there (nil: none). Config.Upstream gives them in the order they
// are tried, as libpq tries a connection string's hosts and, under
// sslmode=prefer or allow, each host with and without TLS.
type upstream struct {
	network, addr string
	tls           *tls.Config
}

// parseUpstream reads Config.Upstream: a libpq connection string or URL,
// host:port, or a Unix socket's path.
func parseUpstream(s string) ([]upstream, error) {
	switch {
	case s == "":
		return nil, errors.New("proxy: Config.Upstream is empty")
	case strings.HasPrefix(s, "/"):
		return []upstream{{network: "unix", addr: s}}, nil
	case !isConnString(s):
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("upstream %q: want a connection string, host:port or a Unix socket's path: %w", s, err)
		}
		return []upstream{{network: "tcp", addr: s}}, nil
	}
	if !namesSSLMode(s) && os.Getenv("PGSSLMODE") == "" {
		s = withSSLMode(s, "disable")
	}
	cfg, err := pgconn.ParseConfig(s)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if cfg.SSLNegotiation == "direct" {
		return nil, errors.New("upstream: sslnegotiation=direct is not supported: the proxy asks for TLS as PostgreSQL 15 expects, with an SSLRequest")
	}
	ups := []upstream{target(cfg.Host, cfg.Port, cfg.TLSConfig)}
	for _, f := range cfg.Fallbacks {
		ups = append(ups, target(f.Host, f.Port, f.TLSConfig))
	}
	return ups, nil
}

// UpstreamAddrs are the addresses the proxy reaches PostgreSQL at, in the
// order it tries them: what a log may say of Config.Upstream, which can
// hold a password.
func (p *Proxy) UpstreamAddrs() []string {
	addrs := make([]string, len(p.upstreams))
	for i, up := range p.upstreams {
		addrs[i] = up.addr
	}
	return addrs
}

func target(host string, port uint16, tc *tls.Config) upstream {
	if strings.HasPrefix(host, "/") { // a Unix socket's directory
		return upstream{network: "unix", addr: fmt.Sprintf("%s/.s.PGSQL.%d", host, port)}
	}
	return upstream{network: "tcp", addr: net.JoinHostPort(host, strconv.Itoa(int(port))), tls: tc}
}

func isConnString(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") || strings.Contains(s, "=")
}

var sslModeKey = regexp.MustCompile(`(^|\s)sslmode\s*=`)

// namesSSLMode reports whether the connection string s says sslmode.
func namesSSLMode(s string) bool {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Query().Has("sslmode")
	}
	return sslModeKey.MatchString(s)
}

// withSSLMode is the connection string s with sslmode=mode added.
func withSSLMode(s, mode string) string {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		if strings.Contains(s, "?") {
			return s + "&sslmode=" + mode
		}
		return s + "?sslmode=" + mode
	}
	return s + " sslmode=" + mode
}

// dialUpstream connects to PostgreSQL: to each of the proxy's upstreams
// in turn until one answers (and accepts TLS where it is asked for),
// returning the one it reached. A CancelRequest goes there too, as libpq
// sends it.
func (p *Proxy) dialUpstream(timeout time.Duration) (net.Conn, *upstream, error) {
	deadline := time.Now().Add(timeout)
	var errs []error
	for i := range p.upstreams {
		up := &p.upstreams[i]
		c, err := up.dial(deadline)
		if err == nil {
			return c, up, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", up.addr, err))
	}
	return nil, nil, errors.Join(errs...)
}

func (up *upstream) dial(deadline time.Time) (net.Conn, error) {
	c, err := net.DialTimeout(up.network, up.addr, time.Until(deadline))
	if err != nil || up.tls == nil {
		return c, err
	}
	c.SetDeadline(deadline)
	req := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), sslRequestCode)
	answer := make([]byte, 1)
	if _, err = c.Write(req); err == nil {
		_, err = io.ReadFull(c, answer) // exactly one byte: what follows is TLS
	}
	if err == nil && answer[0] != 'S' {
		err = errors.New("the server does not accept TLS")
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	tc := tls.Client(c, up.tls)
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS to the server: %w", err)
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}

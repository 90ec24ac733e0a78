//go:build cgo

package proxy

import (
	"fmt"
	"testing"

	"github.com/vecside/vecside/internal/testcert"
)

// TestParseUpstream: Config.Upstream as a connection string or URL
// (libpq's sslmodes, several hosts), host:port or a socket's path.
func TestParseUpstream(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	cert := testcert.New(t)
	type want struct {
		addr string
		tls  string // "", "skip" (not verified) or the name it is verified against
	}
	for _, c := range []struct {
		upstream string
		want     []want
	}{
		{"db:5432", []want{{"db:5432", ""}}},
		{"/run/postgresql/.s.PGSQL.5433", []want{{"/run/postgresql/.s.PGSQL.5433", ""}}},
		{"host=db port=5433", []want{{"db:5433", ""}}}, // no sslmode: no TLS, unlike libpq's prefer
		{"host=db sslmode=disable", []want{{"db:5432", ""}}},
		{"host=db sslmode=allow", []want{{"db:5432", ""}, {"db:5432", "skip"}}},
		{"host=db sslmode=prefer", []want{{"db:5432", "skip"}, {"db:5432", ""}}},
		{"host=db sslmode=require", []want{{"db:5432", "skip"}}},
		{"host=db sslmode=verify-ca sslrootcert=" + cert.CertFile, []want{{"db:5432", "skip"}}},
		{"host=db sslmode=verify-full sslrootcert=" + cert.CertFile, []want{{"db:5432", "db"}}},
		{"postgres://u:pw@a:1,b:2/shop?sslmode=verify-full&sslrootcert=" + cert.CertFile, []want{{"a:1", "a"}, {"b:2", "b"}}},
		{"postgresql://db", []want{{"db:5432", ""}}},
		{"host=/var/run/postgresql port=5433 sslmode=require", []want{{"/var/run/postgresql/.s.PGSQL.5433", ""}}},
	} {
		ups, err := parseUpstream(c.upstream)
		if err != nil {
			t.Errorf("%s: %v", c.upstream, err)
			continue
		}
		var got []want
		for _, u := range ups {
			w := want{addr: u.addr}
			if u.tls != nil {
				w.tls = u.tls.ServerName
				if u.tls.InsecureSkipVerify {
					w.tls = "skip"
				}
			}
			got = append(got, w)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.upstream, got, c.want)
		}
	}
	for _, bad := range []string{"", "db", "host=db sslmode=sometimes", "host=db sslmode=verify-full sslrootcert=/nonexistent/ca.crt",
		"host=db sslnegotiation=direct sslmode=require"} {
		if _, err := parseUpstream(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// PGSSLMODE stands in for a connection string's sslmode, as in libpq.
	t.Setenv("PGSSLMODE", "require")
	if ups, err := parseUpstream("host=db"); err != nil || len(ups) != 1 || ups[0].tls == nil {
		t.Errorf("PGSSLMODE=require: %v, %v", ups, err)
	}
}

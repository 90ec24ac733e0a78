package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/internal/bytesize"
	"github.com/vecside/vecside/rpc"
)

// limitFlags bound what clients of the pgwire server can hold; their
// defaults are rpc.DefaultLimits.
var limitFlags = func() []cli.Flag {
	d := rpc.DefaultLimits
	return []cli.Flag{
		&cli.IntFlag{Category: catLimits, Name: "max-connections", Value: d.MaxConnections, Usage: "sessions at once, the reserved ones included; more are refused with SQLSTATE 53300", EnvVars: []string{"VECSIDE_MAX_CONNECTIONS"}},
		&cli.IntFlag{Category: catLimits, Name: "reserved-connections", Value: d.ReservedConnections, Usage: "sessions of --max-connections that only --admin-user may take", EnvVars: []string{"VECSIDE_RESERVED_CONNECTIONS"}},
		&cli.StringFlag{Category: catLimits, Name: "admin-user", Usage: "the user who may take the reserved sessions (none if empty)", EnvVars: []string{"VECSIDE_ADMIN_USER"}},
		&cli.IntFlag{Category: catLimits, Name: "max-user-connections", Usage: "sessions of any one user but --admin-user (53300 past it); 0 bounds them by --max-connections alone", EnvVars: []string{"VECSIDE_MAX_USER_CONNECTIONS"}},
		&cli.IntFlag{Category: catLimits, Name: "max-startups", Value: d.MaxStartups, Usage: "connections still authenticating, on top of --max-connections; a new one takes the slot of the one idle longest before its startup message, and is refused with 53300 only if all are authenticating", EnvVars: []string{"VECSIDE_MAX_STARTUPS"}},
		&cli.IntFlag{Category: catLimits, Name: "max-startups-per-peer", Value: d.MaxStartupsPerPeer, Usage: "connections of --max-startups from one address past which that address's idle ones give their slots first", EnvVars: []string{"VECSIDE_MAX_STARTUPS_PER_PEER"}},
		&cli.DurationFlag{Category: catLimits, Name: "auth-timeout", Value: d.AuthTimeout, Usage: "time a new connection has to start up and authenticate", EnvVars: []string{"VECSIDE_AUTH_TIMEOUT"}},
		&cli.DurationFlag{Category: catLimits, Name: "idle-timeout", Value: d.IdleTimeout, Usage: "end a session that waits this long for its client, to send or to read (57P05); 0 never", EnvVars: []string{"VECSIDE_IDLE_TIMEOUT"}},
		&cli.StringFlag{Category: catLimits, Name: "max-reply-buffer", Value: sizeText(d.MaxReplyBuffer), Usage: "replies a session holds before it writes them and stops reading until the client takes them", EnvVars: []string{"VECSIDE_MAX_REPLY_BUFFER"}},
		&cli.IntFlag{Category: catLimits, Name: "max-prepared", Value: d.MaxPrepared, Usage: "prepared statements and portals a session may hold (54000 past it)", EnvVars: []string{"VECSIDE_MAX_PREPARED"}},
		&cli.StringFlag{Category: catLimits, Name: "max-prepared-bytes", Value: sizeText(d.MaxPreparedBytes), Usage: "total size of a session's prepared statements and portals (54000 past it)", EnvVars: []string{"VECSIDE_MAX_PREPARED_BYTES"}},
		&cli.IntFlag{Category: catLimits, Name: "max-query-statements", Value: d.MaxQueryStatements, Usage: "statements in one simple query (54000 past it)", EnvVars: []string{"VECSIDE_MAX_QUERY_STATEMENTS"}},
	}
}()

// rpcLimits reads limitFlags.
func rpcLimits(c *cli.Context) (rpc.Limits, error) {
	l := rpc.Limits{
		MaxConnections:      c.Int("max-connections"),
		ReservedConnections: c.Int("reserved-connections"),
		MaxUserConnections:  c.Int("max-user-connections"),
		MaxStartups:         c.Int("max-startups"),
		MaxStartupsPerPeer:  c.Int("max-startups-per-peer"),
		AuthTimeout:         c.Duration("auth-timeout"),
		IdleTimeout:         c.Duration("idle-timeout"),
		MaxPrepared:         c.Int("max-prepared"),
		MaxQueryStatements:  c.Int("max-query-statements"),
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = -1 // the flag's 0 is never; rpc's zero is the default
	}
	if c.Int("reserved-connections") == 0 {
		l.ReservedConnections = -1
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"max-reply-buffer", &l.MaxReplyBuffer}, {"max-prepared-bytes", &l.MaxPreparedBytes}} {
		n, err := bytesize.Parse(c.String(f.name))
		if err != nil {
			return l, fmt.Errorf("--%s: %w", f.name, err)
		}
		*f.dst = int(n)
	}
	return l, nil
}

// sizeText writes n bytes the way bytesize.Parse reads them.
func sizeText(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}

// readSecretFile reads a secret (a token, a password) from the file
// named, without its trailing newline; "" names none.
func readSecretFile(flag, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flag, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("--%s: %s is empty", flag, name)
	}
	return s, nil
}

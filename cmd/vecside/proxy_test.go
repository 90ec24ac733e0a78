//go:build cgo

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/sidecar"
)

// TestProxyCommand: vecside proxy relays sessions to --upstream, asking
// the sidecar at --addr.
func TestProxyCommand(t *testing.T) {
	addr := sidecarFor(t, "cli_proxy", sidecar.Config{Auth: "trust"})
	cl := pgtest.Shared(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	metrics := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- newApp().RunContext(ctx, []string{"vecside", "--log-level", "error", "proxy", "--proxy-listen", listen, "--proxy-metrics-listen", metrics,
			"--upstream", fmt.Sprintf("127.0.0.1:%d", cl.Port), "--addr", addr})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vecside proxy: %v", err)
		}
	}()
	via := strings.Replace(cl.DSN("postgres"), fmt.Sprintf("127.0.0.1:%d", cl.Port), listen, 1)
	var c *pgx.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = pgx.Connect(ctx, via); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var who string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != "postgres" {
		t.Errorf("through vecside proxy: %q, %v", who, err)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "vecside_proxy_sessions_total 1") {
		t.Errorf("/metrics:\n%s", body)
	}
}

func TestUpstreamSSLMode(t *testing.T) {
	for _, c := range []struct {
		mode, upstream string
		tls, err       bool
	}{
		{"disable", "db:5432", false, false},
		{"require", "db:5432", true, false},
		{"verify-full", "db:5432", true, false},
		{"verify-full", "/run/postgresql/.s.PGSQL.5432", false, true},
		{"prefer", "db:5432", false, true},
	} {
		cfg, err := upstreamTLS(c.mode, "", c.upstream)
		if (cfg != nil) != c.tls || (err != nil) != c.err {
			t.Errorf("%s %s: %v, %v", c.mode, c.upstream, cfg, err)
		}
		if c.mode == "verify-full" && cfg != nil && (cfg.ServerName != "db" || cfg.InsecureSkipVerify) {
			t.Errorf("verify-full: ServerName %q, InsecureSkipVerify %v", cfg.ServerName, cfg.InsecureSkipVerify)
		}
	}
}

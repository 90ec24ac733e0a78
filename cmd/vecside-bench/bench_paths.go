package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/rpc"
)

// The ways in that --paths names.
const (
	pathSidecar    = "sidecar"
	pathHeapfetch  = "heapfetch"
	pathSQL        = "sql"
	pathProxy      = "proxy"
	pathServeProxy = "serve-proxy"
	pathPGVector   = "pgvector"
)

var allPaths = []string{pathSidecar, pathHeapfetch, pathSQL, pathProxy, pathServeProxy, pathPGVector}

// parsePaths reads --paths. The proxy needs a cgo build: asked for by
// name in a binary without it, that is an error; by default it is left
// out with a word on stderr.
func parsePaths(s string, named bool) (map[string]bool, error) {
	paths := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allPaths, f) {
			return nil, fmt.Errorf("%q: want some of %s", f, strings.Join(allPaths, ","))
		}
		paths[f] = true
	}
	if (paths[pathProxy] || paths[pathServeProxy]) && !proxyBuilt {
		if named {
			return nil, errProxyNotBuilt
		}
		delete(paths, pathProxy)
		delete(paths, pathServeProxy)
	}
	return paths, nil
}

// sidecarUser is the user the bench logs in to its sidecars as.
const sidecarUser = "vecside"

// makeSidecarUser makes the password the bench's sidecars ask for, and
// their users file.
func (b *bench) makeSidecarUser() error {
	b.sidecarPassword = rand.Text()
	v, err := rpc.NewVerifier(b.sidecarPassword, rpc.DefaultScramIterations)
	if err != nil {
		return err
	}
	b.users, err = rpc.ParseUsers(strings.NewReader(rpc.UserLine(sidecarUser, v)))
	return err
}

// sidecarURL is how the bench logs in to the sidecar at addr.
func (b *bench) sidecarURL(addr string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(sidecarUser, b.sidecarPassword), Host: addr, Path: "/vecside", RawQuery: "sslmode=disable"}
	return u.String()
}

// dialSidecar logs in to the sidecar at addr as the bench.
func (b *bench) dialSidecar(ctx context.Context, addr string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, b.sidecarURL(addr))
	if err != nil {
		return nil, err
	}
	heapfetch.RegisterTypes(conn.TypeMap())
	return conn, nil
}

// perIndex holds a path's client connections for one index at a time:
// the SQL helpers reach one sidecar at a time (their dblink foreign
// server), and a proxy answers a table's column from one sidecar, while
// the bench runs a sidecar per index. The sweep measures an index's
// settings one after the other, so the connections are opened anew when
// it moves on to the next index.
type perIndex struct {
	path string
	// open points the path at t's sidecar and opens a connection per
	// client; warm is the statement that warms each of them.
	open func(ctx context.Context, t *vecsideTarget) (*pathConns, error)
	warm func(ctx context.Context, t *vecsideTarget, conn *pgx.Conn, qi int) ([]int64, error)
	t    *vecsideTarget
	cur  *pathConns
}

// pathConns are the connections of a path for one index.
type pathConns struct {
	conns []*pgx.Conn
	// check, if not nil, is called after each measurement: an error says
	// the path did not go the way it is meant to (the proxy passed a
	// statement through).
	check func() error
	stop  func()
}

func (p *perIndex) close() {
	if p != nil && p.cur != nil {
		p.cur.close()
		p.cur, p.t = nil, nil
	}
}

func (pc *pathConns) close() {
	for _, c := range pc.conns {
		c.Close(context.Background())
	}
	if pc.stop != nil {
		pc.stop()
	}
}

// use returns the path's connections for t, opening them (and warming
// each, every query once, as heapfetch's are) if the last index was
// another.
func (b *bench) use(ctx context.Context, p *perIndex, t *vecsideTarget) (*pathConns, error) {
	if p.t == t {
		return p.cur, nil
	}
	p.close()
	cur, err := p.open(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("%s path, %s: %w", p.path, t.def, err)
	}
	p.t, p.cur = t, cur
	b.say("%s: warming %d %s connection(s): every query once", t.def, len(cur.conns), p.path)
	if err := b.everyQuery(len(cur.conns), func(c, qi int) error { _, err := p.warm(ctx, t, cur.conns[c], qi); return err }); err != nil {
		return nil, fmt.Errorf("%s path, %s: warming up: %w", p.path, t.def, err)
	}
	if cur.check != nil {
		cur.check() // what the warm-up did is not measured
	}
	return cur, nil
}

// measurePath measures one setting of one way in: recall over every
// query on the first client's connection (the timing of one client), then
// --clients clients. search(c, qi) answers query qi on client c.
func (b *bench) measurePath(system, index, mode string, params map[string]float64, cands *float64, search func(c, qi int) ([]int64, error)) error {
	recall, _, tm := b.recallPass(func(qi int) ([]int64, error) { return search(0, qi) })
	if tm.err != nil {
		return fmt.Errorf("%s %s: %w", system, mode, tm.err)
	}
	b.point(system, index, mode, params, recall, cands, 1, tm)
	if b.p.clients > 1 {
		tm := b.timeRun(b.p.clients, func(c, qi int) error { _, err := search(c, qi); return err })
		if tm.err != nil {
			return fmt.Errorf("%s %s: %w", system, mode, tm.err)
		}
		b.point(system, index, mode, params, recall, cands, b.p.clients, tm)
	}
	return nil
}

// measureVecsidePaths measures index t at setting opts through the SQL
// helpers and the proxy, as far as they are measured.
func (b *bench) measureVecsidePaths(ctx context.Context, t *vecsideTarget, opts string, params map[string]float64, cands *float64) error {
	if b.sql != nil {
		pc, err := b.use(ctx, b.sql, t)
		if err != nil {
			return err
		}
		for _, mode := range []string{benchreport.SQLSearch, benchreport.SQLSearchRows} {
			stmt := b.sqlStatement(t, mode, opts)
			if err := b.measurePath("vecside", t.def, mode, params, cands, func(c, qi int) ([]int64, error) {
				return b.queryIDs(ctx, pc.conns[c], stmt, qi)
			}); err != nil {
				return err
			}
		}
	}
	for _, px := range []*perIndex{b.proxy, b.serveProxy} {
		if px == nil {
			continue
		}
		pc, err := b.use(ctx, px, t)
		if err != nil {
			return err
		}
		if err := b.setProxyOptions(ctx, pc.conns, opts); err != nil {
			return err
		}
		if err := b.measurePath("vecside", t.def, px.path, params, cands, func(c, qi int) ([]int64, error) {
			return b.proxyQuery(ctx, pc.conns[c], qi)
		}); err != nil {
			return err
		}
		if err := pc.check(); err != nil {
			return fmt.Errorf("%s path, %s %s: %w", px.path, t.def, opts, err)
		}
	}
	return nil
}

// queryIDs runs stmt with query qi as its one parameter and returns the
// ids.
func (b *bench) queryIDs(ctx context.Context, conn *pgx.Conn, stmt string, qi int) ([]int64, error) {
	rows, err := conn.Query(ctx, stmt, b.queries[qi])
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// startPaths sets up the SQL and proxy paths, where they are measured.
func (b *bench) startPaths(ctx context.Context, targets []*vecsideTarget) error {
	if b.p.paths[pathSQL] {
		if err := b.startSQL(ctx, targets); err != nil {
			return err
		}
	}
	if b.p.paths[pathProxy] || b.p.paths[pathServeProxy] {
		if err := b.startProxyPaths(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stopPaths closes what startPaths and the sweep opened.
func (b *bench) stopPaths() {
	b.proxy.close()
	b.serveProxy.close()
	b.sql.close()
	b.stopSQL()
}

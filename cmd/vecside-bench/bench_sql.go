package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/deploy"
)

// startSQL installs the SQL helpers into the bench's database as vecside
// sql install does (deploy.Install), with every index registered, and
// readies the sql path. With --source, a database that already has the
// helpers is left alone and the path is not measured: pointing them at
// the bench's sidecars would take them from their own.
func (b *bench) startSQL(ctx context.Context, targets []*vecsideTarget) error {
	if b.p.source != "" {
		var installed bool
		if err := b.db.QueryRow(ctx, "SELECT to_regnamespace('vecside') IS NOT NULL").Scan(&installed); err != nil {
			return err
		}
		if installed {
			b.say("sql: --source already has the SQL helpers (schema vecside); the bench leaves them alone and does not measure the sql path")
			return nil
		}
	}
	var indexes []deploy.Index
	for _, t := range targets {
		spec, err := b.specOf(t.def)
		if err != nil {
			return err
		}
		indexes = append(indexes, deploy.Index{Name: t.name, Table: pgx.Identifier{"public", benchTable}.Sanitize(),
			KeyColumn: "id", VectorColumn: "embedding", Metric: b.p.metric.String(), ExactDistances: spec.ExactDistances()})
	}
	side, err := b.helperSidecar(targets[0])
	if err != nil {
		return err
	}
	b.say("sql: installing the SQL helpers, %d index(es) registered", len(indexes))
	if err := deploy.Install(ctx, b.db, side, indexes); err != nil {
		return err
	}
	b.sqlInstalled = true
	b.sql = &perIndex{path: pathSQL, open: b.openSQL, warm: func(ctx context.Context, t *vecsideTarget, conn *pgx.Conn, qi int) ([]int64, error) {
		return b.queryIDs(ctx, conn, b.sqlStatement(t, benchreport.SQLSearch, ""), qi)
	}}
	return nil
}

// helperSidecar is t's sidecar as the helpers reach it: through dblink,
// whose connections run as the NOLOGIN role vecside_owner, a
// non-superuser, which dblink lets connect only with a password.
func (b *bench) helperSidecar(t *vecsideTarget) (deploy.Sidecar, error) {
	host, port, err := net.SplitHostPort(t.addr)
	if err != nil {
		return deploy.Sidecar{}, err
	}
	p, err := strconv.Atoi(port)
	return deploy.Sidecar{Host: host, Port: p, User: sidecarUser, Password: b.sidecarPassword, SSLMode: "disable"}, err
}

// openSQL points the helpers at t's sidecar (vecside.set_sidecar: one
// foreign server at a time) and opens a connection per client. They must
// be new backends: a backend keeps the named dblink connection it opened
// at its first search for the rest of its life, to the sidecar the
// foreign server named then, and only vecside_owner may close it.
func (b *bench) openSQL(ctx context.Context, t *vecsideTarget) (*pathConns, error) {
	side, err := b.helperSidecar(t)
	if err != nil {
		return nil, err
	}
	if _, err := b.db.Exec(ctx, "SELECT vecside.set_sidecar($1, $2, $3, $4, $5)", side.Host, side.Port, side.User, side.Password, side.SSLMode); err != nil {
		return nil, err
	}
	return b.openClients(ctx, func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, b.dsn) })
}

// openClients opens a connection per client with dial.
func (b *bench) openClients(ctx context.Context, dial func(context.Context) (*pgx.Conn, error)) (*pathConns, error) {
	pc := &pathConns{}
	for range b.p.clients {
		c, err := dial(ctx)
		if err != nil {
			for _, c := range pc.conns {
				c.Close(context.Background())
			}
			return nil, err
		}
		pc.conns = append(pc.conns, c)
	}
	return pc, nil
}

// sqlStatement is the statement a SQL user writes to search t through
// the helpers, the query vector its one parameter and opts the knn
// options, as the sidecar-only path sends them.
func (b *bench) sqlStatement(t *vecsideTarget, mode, opts string) string {
	if mode == benchreport.SQLSearchRows {
		return fmt.Sprintf("SELECT (item).id FROM vecside.search_rows(%s, $1::real[], %d, NULL::%s, %s)",
			quoteLiteral(t.name), b.p.k, benchTable, quoteLiteral(opts))
	}
	return fmt.Sprintf("SELECT id FROM vecside.search(%s, $1::real[], %d, NULL::bigint, %s)", quoteLiteral(t.name), b.p.k, quoteLiteral(opts))
}

// stopSQL removes the helpers from --source's database, where the bench
// installed them.
func (b *bench) stopSQL() {
	if !b.sqlInstalled || b.p.source == "" {
		return
	}
	if err := deploy.Uninstall(context.Background(), b.db); err != nil {
		b.say("%v", err)
	}
}

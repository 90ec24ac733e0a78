package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/internal/pgvalue"
)

var errProxyNotBuilt = errors.New("the proxy path needs a vecside built with cgo (the proxy's SQL parser, pg_query); this one was built with CGO_ENABLED=0")

// startProxyPaths readies the proxy paths: the statement's operator must
// exist for the scratch column's type. On real[] the bench creates it in
// its throwaway database; --source's must have it already, or the paths
// are not measured.
func (b *bench) startProxyPaths(ctx context.Context) error {
	if !b.vectorColumn {
		var exists bool
		op := fmt.Sprintf("public.%s(real[],real[])", b.p.metric.Operator())
		if err := b.db.QueryRow(ctx, "SELECT to_regoperator($1) IS NOT NULL", op).Scan(&exists); err != nil {
			return err
		}
		switch {
		case !exists && b.cluster == nil:
			b.say("proxy: --source has no operator %s for pgvector's statement on the real[] scratch table; the proxy paths are not measured", op)
			return nil
		case !exists:
			b.say("proxy: creating pgvector's operators over real[] from vecside's distance functions")
			for _, sql := range []string{deploy.DistanceSQL, deploy.RealOperatorsSQL} {
				if _, err := b.db.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
					return fmt.Errorf("proxy: %w", err)
				}
			}
		}
	}
	// The vector parameter as an application sends it: a real[] in
	// binary, or pgvector's text form, as its Python and JavaScript
	// clients send it.
	b.proxyArgs = make([]any, len(b.queries))
	for i, q := range b.queries {
		b.proxyArgs[i] = q
		if b.vectorColumn {
			b.proxyArgs[i] = string(pgvalue.AppendVectorText(nil, q))
		}
	}
	warm := func(ctx context.Context, _ *vecsideTarget, conn *pgx.Conn, qi int) ([]int64, error) {
		return b.proxyQuery(ctx, conn, qi)
	}
	if b.p.paths[pathProxy] {
		b.proxy = &perIndex{path: benchreport.Proxy, open: func(ctx context.Context, t *vecsideTarget) (*pathConns, error) {
			return b.openProxy(ctx, t, false)
		}, warm: warm}
	}
	if b.p.paths[pathServeProxy] {
		b.serveProxy = &perIndex{path: benchreport.ServeProxy, open: func(ctx context.Context, t *vecsideTarget) (*pathConns, error) {
			return b.openProxy(ctx, t, true)
		}, warm: warm}
	}
	return nil
}

// proxyQuery sends pgvector's statement, unchanged, through the proxy:
// pgx prepares it once per connection and binds the vector.
func (b *bench) proxyQuery(ctx context.Context, conn *pgx.Conn, qi int) ([]int64, error) {
	stmt := fmt.Sprintf("SELECT id FROM %s ORDER BY embedding %s $1 LIMIT %d", benchTable, b.p.metric.Operator(), b.p.k)
	rows, err := conn.Query(ctx, stmt, b.proxyArgs[qi])
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// setProxyOptions sets a sweep setting on every proxy connection as a
// session setting, which the proxy sends the sidecar as knn options:
// vecside.ef_search, vecside.probes and vecside.oversample, each 0 (the
// index's default) where opts does not name it. vecside.* is set even
// then, since it takes precedence over pgvector's hnsw.ef_search and
// ivfflat.probes, which a session that has loaded pgvector has.
func (b *bench) setProxyOptions(ctx context.Context, conns []*pgx.Conn, opts string) error {
	set := map[string]string{"ef_search": "0", "probes": "0", "oversample": "0"}
	for _, f := range strings.Fields(opts) {
		k, v, _ := strings.Cut(f, "=")
		set[k] = v
	}
	var sql []string
	for _, k := range []string{"ef_search", "probes", "oversample"} {
		sql = append(sql, fmt.Sprintf("SET vecside.%s = %s", k, quoteLiteral(set[k])))
	}
	for _, c := range conns {
		if _, err := c.Exec(ctx, strings.Join(sql, "; ")); err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
	}
	return nil
}

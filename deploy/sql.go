package deploy

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DistanceSQL creates schema vecside and its exact distance functions over
// real[]; it can be run again safely.
//
//go:embed sql/distance.sql
var DistanceSQL string

// RealOperatorsSQL gives real[] pgvector's distance operators (<->, <=>,
// <#>) in schema public, over DistanceSQL's functions, so that
// pgvector's statements run word for word on a real[] column where
// pgvector is not installed: the proxy's tests and the bench's proxy
// path on a real[] scratch table. It is not part of what vecside sql
// install creates.
const RealOperatorsSQL = `
CREATE OPERATOR public.<-> (LEFTARG = real[], RIGHTARG = real[], FUNCTION = vecside.l2_distance);
CREATE OPERATOR public.<=> (LEFTARG = real[], RIGHTARG = real[], FUNCTION = vecside.cosine_distance);
CREATE OPERATOR public.<#> (LEFTARG = real[], RIGHTARG = real[], FUNCTION = vecside.negative_inner_product)`

// HelpersSQL creates the SQL helpers that call a sidecar through dblink;
// it needs DistanceSQL first, a superuser, and can be run again safely.
//
//go:embed sql/helpers.sql
var HelpersSQL string

// UninstallSQL removes what DistanceSQL and HelpersSQL created.
//
//go:embed sql/uninstall.sql
var UninstallSQL string

// Sidecar is where the helpers find the sidecar, and how they log in.
type Sidecar struct {
	Host        string // a host name or address, or the directory of the sidecar's Unix socket (libpq's host=/dir)
	Port        int
	User        string
	Password    string
	SSLMode     string // libpq's sslmode; "" is prefer
	SSLRootCert string // a file on the database server, for verify-ca and verify-full
}

// Index is an index of the sidecar as the helpers know it. AllowRLS opts
// it in for roles under row-level security (see helpers.sql);
// ExactDistances (indexer.Spec.ExactDistances) has the helpers ask for
// xids.
type Index struct {
	Name, Table, KeyColumn, VectorColumn, Metric string
	AllowRLS, ExactDistances                     bool
}

// SidecarIndexes lists the indexes a sidecar serves, from vecside_status().
func SidecarIndexes(ctx context.Context, sidecar *pgx.Conn) ([]Index, error) {
	rows, err := sidecar.Query(ctx, "SELECT index_name, table_name, key_column, column_name, metric, exact_distances FROM vecside_status()",
		pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("deploy: listing the sidecar's indexes: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Index, error) {
		var ix Index
		err := r.Scan(&ix.Name, &ix.Table, &ix.KeyColumn, &ix.VectorColumn, &ix.Metric, &ix.ExactDistances)
		if schema, table, ok := strings.Cut(ix.Table, "."); ok { // unquoted schema.table
			ix.Table = pgx.Identifier{schema, table}.Sanitize()
		}
		return ix, err
	})
}

// configureCalls are the calls that point the helpers at s and register
// indexes, each with its arguments.
func configureCalls(s Sidecar, indexes []Index) [][]any {
	sslmode := s.SSLMode
	if sslmode == "" {
		sslmode = "prefer"
	}
	var rootCert any
	if s.SSLRootCert != "" {
		rootCert = s.SSLRootCert
	}
	calls := [][]any{{"SELECT vecside.set_sidecar($1, $2, $3, $4, $5, $6)", s.Host, s.Port, s.User, s.Password, sslmode, rootCert}}
	for _, ix := range indexes {
		calls = append(calls, []any{"SELECT vecside.register_index($1, $2::regclass, $3, $4, $5, $6, $7)",
			ix.Name, ix.Table, ix.KeyColumn, ix.VectorColumn, ix.Metric, ix.AllowRLS, ix.ExactDistances})
	}
	return calls
}

// Install creates the helpers in the database conn is connected to, as
// one transaction: conn's role must be a superuser.
func Install(ctx context.Context, conn *pgx.Conn, s Sidecar, indexes []Index) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, script := range []string{DistanceSQL, HelpersSQL} {
			if _, err := tx.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("deploy: installing the SQL helpers: %w", err)
			}
		}
		for _, call := range configureCalls(s, indexes) {
			if _, err := tx.Exec(ctx, call[0].(string), call[1:]...); err != nil {
				return fmt.Errorf("deploy: %s: %w", strings.Fields(call[0].(string))[1], err)
			}
		}
		return nil
	})
}

// Uninstall removes the helpers from the database conn is connected to.
func Uninstall(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, UninstallSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("deploy: removing the SQL helpers: %w", err)
	}
	return nil
}

// InstallScript is what Install runs, as one script for a DBA to review
// and run with psql: the arguments are written as literals (the
// sidecar's password among them).
func InstallScript(s Sidecar, indexes []Index) string {
	var b strings.Builder
	b.WriteString("BEGIN;\n\n" + DistanceSQL + "\n" + HelpersSQL + "\n")
	for _, call := range configureCalls(s, indexes) {
		sql := call[0].(string)
		for i := len(call) - 1; i >= 1; i-- { // $10 before $1
			sql = strings.ReplaceAll(sql, fmt.Sprintf("$%d", i), sqlLiteral(call[i]))
		}
		b.WriteString(sql + ";\n")
	}
	b.WriteString("\nCOMMIT;\n")
	return b.String()
}

// sqlLiteral writes v as an SQL literal that means the same whatever
// standard_conforming_strings is: E” with escaped backslashes if it
// holds any.
func sqlLiteral(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case bool, int:
		return fmt.Sprint(v)
	case string:
		s := "'" + strings.ReplaceAll(v, "'", "''") + "'"
		if strings.Contains(v, `\`) {
			s = "E" + strings.ReplaceAll(s, `\`, `\\`)
		}
		return s
	}
	panic(fmt.Sprintf("deploy: no literal for %T", v))
}

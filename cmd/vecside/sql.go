package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/vecside/vecside/deploy"
	"github.com/vecside/vecside/indexer"
)

var sqlFlags = []cli.Flag{
	&cli.StringFlag{Name: "sidecar", Value: "127.0.0.1:6433", Usage: "the sidecar's host:port as the database server reaches it, or DIR:PORT for its Unix socket on the same host (serve's --unix-socket-dir and the port of its --listen)", EnvVars: []string{"VECSIDE_SIDECAR"}},
	&cli.StringFlag{Name: "sidecar-user", Value: "vecside", Usage: "the user the helpers log in to the sidecar as (a line of its --users file)", EnvVars: []string{"VECSIDE_SIDECAR_USER"}},
	&cli.StringFlag{Name: "sidecar-password-file", Usage: "file holding that user's password; else $VECSIDE_PASSWORD (never a flag's value)", EnvVars: []string{"VECSIDE_SIDECAR_PASSWORD_FILE"}},
	&cli.StringFlag{Name: "sidecar-sslmode", Value: "prefer", Usage: "libpq sslmode of the helpers' connection: disable, prefer, require, verify-ca or verify-full", EnvVars: []string{"VECSIDE_SIDECAR_SSLMODE"}},
	&cli.StringFlag{Name: "sidecar-sslrootcert", Usage: "CA file on the database server, for verify-ca and verify-full; without --index, also read here to ask the sidecar for its indexes", EnvVars: []string{"VECSIDE_SIDECAR_SSLROOTCERT"}},
	&cli.StringSliceFlag{Name: "index", Usage: "an index as serve's --index defines it (repeatable); without any, the sidecar is asked for its indexes", EnvVars: []string{"VECSIDE_INDEX"}},
	&cli.StringSliceFlag{Name: "allow-rls", Usage: "an index whose candidates roles under row-level security may ask for (repeatable; see docs/sql-helpers.md)"},
}

var sqlCommand = &cli.Command{
	Name:  "sql",
	Usage: "install, remove or print the SQL helpers that call the sidecar from inside Postgres (dblink)",
	Description: `install creates, as a superuser of --source (dblink is not a trusted
extension): schema vecside with vecside.search, vecside.search_rows,
vecside.candidates and vecside.candidate_arrays, the roles vecside_owner and vecside_user, a dblink_fdw
server for the sidecar and vecside_owner's user mapping, and registers the
indexes. Nothing is granted to PUBLIC: GRANT vecside_user TO a role to let
it search. print writes the same SQL for a DBA to review and run with psql
(it holds the sidecar's password). uninstall removes it all but dblink.`,
	Subcommands: []*cli.Command{
		{Name: "install", Usage: "create the helpers in --source", Flags: append([]cli.Flag{sourceFlag}, sqlFlags...),
			Action: func(c *cli.Context) error {
				s, indexes, err := helperConfig(c)
				if err != nil {
					return err
				}
				db, err := pgx.Connect(c.Context, c.String("source"))
				if err != nil {
					return err
				}
				defer db.Close(context.Background())
				if err := deploy.Install(c.Context, db, s, indexes); err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "installed the SQL helpers for %d index(es); GRANT vecside_user TO a role to let it search\n", len(indexes))
				return nil
			}},
		{Name: "print", Usage: "write the SQL install runs, for a DBA", Flags: sqlFlags,
			Action: func(c *cli.Context) error {
				s, indexes, err := helperConfig(c)
				if err != nil {
					return err
				}
				fmt.Fprint(c.App.Writer, deploy.InstallScript(s, indexes))
				return nil
			}},
		{Name: "uninstall", Usage: "remove the helpers from --source", Flags: []cli.Flag{sourceFlag},
			Action: func(c *cli.Context) error {
				db, err := pgx.Connect(c.Context, c.String("source"))
				if err != nil {
					return err
				}
				defer db.Close(context.Background())
				before, err := catalogObjects(c.Context, db)
				if err != nil {
					return err
				}
				if err := deploy.Uninstall(c.Context, db); err != nil {
					return err
				}
				after, err := catalogObjects(c.Context, db)
				if err != nil {
					return err
				}
				removed := 0
				for _, o := range before {
					if !slices.Contains(after, o) {
						fmt.Fprintln(c.App.Writer, "removed", o)
						removed++
					}
				}
				if removed == 0 {
					fmt.Fprintln(c.App.Writer, "nothing to remove: the helpers were not installed in this database")
				}
				return nil
			}},
	},
}

// catalogObjects lists the schemas, foreign servers and roles db shows,
// sorted: what uninstall removed is what is gone after it.
func catalogObjects(ctx context.Context, db *pgx.Conn) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT 'schema ' || nspname FROM pg_namespace
		UNION ALL SELECT 'foreign server ' || srvname FROM pg_foreign_server
		UNION ALL SELECT 'role ' || rolname FROM pg_roles ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// helperConfig reads sqlFlags: the sidecar and its password, and the
// indexes, from --index or else from the sidecar.
func helperConfig(c *cli.Context) (deploy.Sidecar, []deploy.Index, error) {
	host, port, err := net.SplitHostPort(c.String("sidecar"))
	if err != nil {
		return deploy.Sidecar{}, nil, fmt.Errorf("--sidecar: %w", err)
	}
	s := deploy.Sidecar{Host: host, User: c.String("sidecar-user"), SSLMode: c.String("sidecar-sslmode"), SSLRootCert: c.String("sidecar-sslrootcert")}
	if s.Port, err = strconv.Atoi(port); err != nil {
		return s, nil, fmt.Errorf("--sidecar: port %q", port)
	}
	if s.Password, err = readSecretFile("sidecar-password-file", c.String("sidecar-password-file")); err != nil {
		return s, nil, err
	}
	if s.Password == "" {
		s.Password = os.Getenv("VECSIDE_PASSWORD")
	}
	if s.Password == "" {
		return s, nil, errors.New("the sidecar's password: set --sidecar-password-file or VECSIDE_PASSWORD (dblink lets a non-superuser connect only with a password)")
	}
	var indexes []deploy.Index
	for _, def := range c.StringSlice("index") {
		spec, err := indexer.ParseSpec(def)
		if err != nil {
			return s, nil, err
		}
		indexes = append(indexes, deploy.Index{Name: spec.Name, Table: spec.QualifiedTable(), KeyColumn: spec.Key, VectorColumn: spec.Column,
			Metric: spec.Metric.String(), ExactDistances: spec.ExactDistances()})
	}
	if len(indexes) == 0 {
		if indexes, err = askSidecar(c.Context, s); err != nil {
			return s, nil, err
		}
	}
	for _, name := range c.StringSlice("allow-rls") {
		i := slices.IndexFunc(indexes, func(ix deploy.Index) bool { return ix.Name == name })
		if i < 0 {
			return s, nil, fmt.Errorf("--allow-rls %s: no such index", name)
		}
		indexes[i].AllowRLS = true
	}
	return s, indexes, nil
}

// askSidecar lists the sidecar's indexes, logging in as the helpers will:
// with their sslmode, and their CA file, read here (the same path as on
// the database server).
func askSidecar(ctx context.Context, s deploy.Sidecar) ([]deploy.Index, error) {
	q := url.Values{"sslmode": {s.SSLMode}}
	if s.SSLRootCert != "" {
		q.Set("sslrootcert", s.SSLRootCert)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(s.User, s.Password), Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
		Path: "/vecside", RawQuery: q.Encode()}
	side, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("asking the sidecar for its indexes (or name them with --index): %w", err)
	}
	defer side.Close(context.Background())
	return deploy.SidecarIndexes(ctx, side)
}

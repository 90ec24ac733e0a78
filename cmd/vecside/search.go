package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/heapfetch"
	"github.com/vecside/vecside/internal/pgvalue"
)

var searchCommand = &cli.Command{
	Name:      "search",
	Usage:     "print the rows nearest to a vector",
	ArgsUsage: "VECTOR  (as [1,2,3] or {1,2,3})",
	Description: `Without --source, prints the sidecar's candidates and their distances.
With --source, fetches those rows from the database and prints them
re-ranked by exact distance, as an application using heapfetch sees them.`,
	Flags: []cli.Flag{
		addrFlag,
		userFlag,
		&cli.StringFlag{Name: "index", Usage: "index name", Required: true},
		&cli.IntFlag{Name: "k", Value: 10, Usage: "number of rows"},
		&cli.Float64Flag{Name: "oversample", Usage: "ask the sidecar for at most k × oversample candidates", DefaultText: "the index's own"},
		&cli.StringFlag{Name: "source", Usage: "re-rank against this database (a libpq connection string or URL)", EnvVars: []string{"VECSIDE_SOURCE"}},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return fmt.Errorf("want one VECTOR argument, such as '[0.1,0.2,0.3]'")
		}
		q, err := pgvalue.ParseVector(c.Args().First())
		if err != nil {
			return err
		}
		ctx := c.Context
		side, err := dialSidecar(ctx, c.String("addr"), c.String("user"))
		if err != nil {
			return fmt.Errorf("connecting to the sidecar: %w", err)
		}
		defer side.Close(context.Background())
		req := heapfetch.Request{Index: c.String("index"), Vector: q, K: c.Int("k"), Oversample: c.Float64("oversample")}
		w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		defer w.Flush()
		fmt.Fprintln(w, "id\tdistance")
		if c.String("source") == "" {
			opts := fmt.Sprintf("oversample=%g", req.Oversample)
			rows, err := side.Query(ctx, "SELECT id, distance FROM knn($1, $2, $3, $4)", req.Index, q, req.K, opts)
			if err != nil {
				return err
			}
			var id any
			var d float64
			_, err = pgx.ForEachRow(rows, []any{&id, &d}, func() error {
				_, err := fmt.Fprintf(w, "%s\t%g\n", formatKey(id), d)
				return err
			})
			return err
		}
		heap, err := pgx.Connect(ctx, c.String("source"))
		if err != nil {
			return fmt.Errorf("connecting to --source: %w", err)
		}
		defer heap.Close(context.Background())
		rows, err := heapfetch.New(side, heap).Search(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range rows {
			fmt.Fprintf(w, "%v\t%g\n", formatKey(r.Key), r.Distance)
		}
		return nil
	},
}

// dialSidecar connects to the sidecar at addr (see sidecarURL), ready to
// send query vectors (heapfetch.RegisterTypes).
func dialSidecar(ctx context.Context, addr, user string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, sidecarURL(addr, user))
	if err != nil {
		return nil, err
	}
	heapfetch.RegisterTypes(conn.TypeMap())
	return conn, nil
}

// sidecarURL accepts host:port, where it logs in as user, as well as a
// full connection URL.
func sidecarURL(addr, user string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		u := url.URL{Scheme: "postgres", User: url.User(user), Host: addr, Path: "/vecside", RawQuery: "sslmode=prefer"}
		return u.String()
	}
	return addr
}

// formatKey prints a uuid key as a uuid, other keys as themselves.
func formatKey(k any) string {
	if u, ok := k.([16]byte); ok {
		return fmt.Sprintf("%x-%x-%x-%x-%x", u[:4], u[4:6], u[6:8], u[8:10], u[10:])
	}
	return fmt.Sprint(k)
}

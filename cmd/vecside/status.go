package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
)

var addrFlag = &cli.StringFlag{Name: "addr", Value: "127.0.0.1:6433", Usage: "the sidecar's pgwire address (host:port, as --user) or a connection URL; the password from the URL or PGPASSWORD", EnvVars: []string{"VECSIDE_ADDR"}}

// defaultUser is the sidecar user that clients of the CLI log in as
// unless told otherwise.
const defaultUser = "vecside"

// userFlag falls back on PGUSER, as the password falls back on
// PGPASSWORD: the sidecar speaks pgwire, and its users are set up as a
// database's are.
var userFlag = &cli.StringFlag{Name: "user", Value: defaultUser, Usage: "the sidecar user to log in as (a user of its --users file), when --addr is host:port; a URL names its own", EnvVars: []string{"VECSIDE_USER", "PGUSER"}}

var statusCommand = &cli.Command{
	Name:  "status",
	Usage: "print a running sidecar's indexes: state, rows, lag, memory, errors",
	Description: `Asks the sidecar for SELECT * FROM vecside_status() and prints one line
per index; an index in error has its error on the line below. Exits
non-zero if any index is in error.`,
	Flags: []cli.Flag{addrFlag, userFlag, configFlag},
	Action: func(c *cli.Context) error {
		side, err := dialSidecar(c.Context, c.String("addr"), c.String("user"))
		if err != nil {
			return fmt.Errorf("connecting to the sidecar: %w", err)
		}
		defer side.Close(context.Background())
		// The simple protocol returns every column as text, pg_lsn included.
		rows, err := side.Query(c.Context, `SELECT index_name, table_name, column_name, kind, state, rows, skipped_rows,
			copied_rows, lag_bytes, applied_lsn, index_bytes, error FROM vecside_status()`, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "INDEX\tTABLE\tKIND\tSTATE\tROWS\tSKIPPED\tCOPIED\tLAG\tAPPLIED LSN\tMEMORY")
		failed := 0
		for rows.Next() {
			v := make([]string, 12)
			for i, raw := range rows.RawValues() {
				v[i] = string(raw)
			}
			fmt.Fprintf(w, "%s\t%s(%s)\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], bytesText(v[8]), v[9], bytesText(v[10]))
			switch v[4] {
			case "error":
				failed++
				fmt.Fprintf(w, "  error: %s\n", v[11])
			case "waiting":
				fmt.Fprintf(w, "  %s\n", v[11])
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		w.Flush()
		if failed > 0 {
			return cli.Exit(fmt.Sprintf("%d index(es) in error", failed), 1)
		}
		return nil
	},
}

// bytesText shows a byte count in binary units.
func bytesText(s string) string {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for ; n >= 1024 && i < len(units)-1; i++ {
		n /= 1024
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
	"github.com/vecside/vecside/replicate/declared"
)

var nameFlag = &cli.StringFlag{Name: "name", Value: "vecside", Usage: "name of the publication and the replication slot: lower-case letters, digits and _ ('-' and '.' become '_', so that a pod name such as vecside-0 gives each pod its own)", EnvVars: []string{"VECSIDE_NAME"}}

// slotName is --name as the publication and the slot are named: '-' and
// '.', which Postgres refuses in a slot's name and host and pod names
// hold, become '_'.
func slotName(c *cli.Context) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(c.String("name"))
}

var checkCommand = &cli.Command{
	Name:  "check",
	Usage: "check that a database is ready for vecside, and say how to fix what is not",
	Description: `Checks the server version, wal_level, the REPLICATION attribute, free slots
and senders, max_slot_wal_keep_size, the slot and publication named --name,
and for each index its table: privileges, replica identity, column type,
and its where= row filter (tried in a publication inside a transaction that
is rolled back). The indexes are those of --index and, as serve's
--discover would, the ones the database declares (pgvector indexes, and
columns commented 'vecside: ...'), each listed with its definition.
Exits non-zero only for problems that prevent operation; risks are warnings.
It changes nothing.`,
	Flags: []cli.Flag{
		configFlag,
		sourceFlag,
		nameFlag,
		&cli.StringSliceFlag{Name: "index", Usage: "an index definition, as for serve (repeatable)", EnvVars: []string{"VECSIDE_INDEX"}},
		&cli.StringFlag{Name: "discover", Value: "auto", Usage: "also check the indexes the database declares, as serve --discover would serve them: auto, on or off", EnvVars: []string{"VECSIDE_DISCOVER"}},
		&cli.StringSliceFlag{Name: "discover-tables", Usage: "as for serve", EnvVars: []string{"VECSIDE_DISCOVER_TABLES"}},
	},
	Action: func(c *cli.Context) error {
		var specs []indexer.Spec
		for _, def := range c.StringSlice("index") {
			s, err := indexer.ParseSpec(def)
			if err != nil {
				return err
			}
			specs = append(specs, s)
		}
		declaredFindings, specs, err := checkDeclared(c, specs)
		if err != nil {
			return err
		}
		findings, err := replicate.Check(c.Context, c.String("source"), slotName(c), specs)
		findings = append(declaredFindings, findings...)
		w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		failed := 0
		for _, f := range findings {
			fmt.Fprintf(w, "%s\t%s\t%s\n", f.Level, f.Check, f.Detail)
			if f.Fix != "" {
				fmt.Fprintf(w, "\t\tfix: %s\n", f.Fix)
			}
			if f.Level == replicate.Fail {
				failed++
			}
		}
		w.Flush()
		if err != nil {
			return err
		}
		if failed > 0 {
			return cli.Exit(fmt.Sprintf("%d check(s) failed", failed), 1)
		}
		return nil
	},
}

// checkDeclared lists, as findings, the indexes the database declares
// that serve would serve beside flags (and those it would not, with
// why), and returns flags with the former.
func checkDeclared(c *cli.Context, flags []indexer.Spec) ([]replicate.Finding, []indexer.Spec, error) {
	d := sidecar.Discovery{Mode: c.String("discover"), Tables: c.StringSlice("discover-tables")}
	on, err := d.Enabled(len(flags))
	if err != nil || !on {
		return nil, flags, err
	}
	filter, err := declared.ParseFilter(d.Tables)
	if err != nil {
		return nil, nil, err
	}
	conn, err := pgx.Connect(c.Context, c.String("source"))
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to --source: %w", err)
	}
	defer conn.Close(context.Background())
	found, skipped, err := sidecar.Declared(c.Context, conn, filter, flags)
	if err != nil {
		return nil, nil, err
	}
	var findings []replicate.Finding
	for _, s := range skipped {
		findings = append(findings, replicate.Finding{Level: replicate.Warn, Check: "declared " + s.From, Detail: "not served: " + s.Why})
	}
	for _, d := range found {
		findings = append(findings, replicate.Finding{Level: replicate.OK, Check: "declared " + d.From, Detail: "serves " + d.Spec.String()})
		flags = append(flags, d.Spec)
	}
	if len(found) == 0 && len(flags) == 0 {
		findings = append(findings, replicate.Finding{Level: replicate.Warn, Check: "declared indexes", Detail: "none: no pgvector index (hnsw, ivfflat) and no column commented 'vecside: …'",
			Fix: "CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops), or COMMENT ON COLUMN items.embedding IS 'vecside: metric=cosine', or give --index"})
	}
	return findings, flags, nil
}

var teardownCommand = &cli.Command{
	Name:  "teardown",
	Usage: "drop the replication slot and the publication named --name, and nothing else",
	Description: `Drops them only if vecside made them: a slot of the name in another
database, with another plugin or without vecside's publication, and a
publication without vecside's mark, are refused with whose they are.
Stop the sidecar first; teardown waits a few seconds for its walsender to
let the slot go.`,
	Flags: []cli.Flag{configFlag, sourceFlag, nameFlag},
	Action: func(c *cli.Context) error {
		done, err := replicate.Teardown(c.Context, c.String("source"), slotName(c), sidecar.TeardownWait)
		for _, d := range done {
			fmt.Fprintln(c.App.Writer, d)
		}
		if err == nil && len(done) == 0 {
			fmt.Fprintf(os.Stderr, "nothing named %s to drop\n", slotName(c))
		}
		return err
	},
}

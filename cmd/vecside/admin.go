package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/cmd/vecside/sidecar"
	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
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
and for each --index its table: privileges, replica identity, column type,
and its where= row filter (tried in a publication inside a transaction that
is rolled back).
Exits non-zero only for problems that prevent operation; risks are warnings.
It changes nothing.`,
	Flags: []cli.Flag{
		configFlag,
		sourceFlag,
		nameFlag,
		&cli.StringSliceFlag{Name: "index", Usage: "an index definition, as for serve (repeatable)", EnvVars: []string{"VECSIDE_INDEX"}},
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
		findings, err := replicate.Check(c.Context, c.String("source"), slotName(c), specs)
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

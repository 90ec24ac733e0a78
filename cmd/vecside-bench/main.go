package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/internal/procs"
)

func main() {
	procs.Serve() // the in-process sidecars run as vecside serve's do: see internal/procs
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "vecside-bench:", err)
		os.Exit(1)
	}
}

// newApp is the command line: the bench is its one action.
func newApp() *cli.App {
	return &cli.App{
		Name:        benchCommand.Name,
		Usage:       benchCommand.Usage,
		Description: benchCommand.Description,
		Flags:       benchCommand.Flags,
		Action:      benchCommand.Action,
	}
}

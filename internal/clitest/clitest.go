// Package clitest runs a command's command line inside a test: the
// urfave/cli application the command's main would run, its output
// captured and its exit codes returned as errors instead of ending the
// test binary.
package clitest

import (
	"bytes"
	"testing"

	"github.com/urfave/cli/v2"
)

// Run runs app with args (args[0] the command's name) and returns what
// it printed.
func Run(t testing.TB, app *cli.App, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	app.ExitErrHandler = func(*cli.Context, error) {} // return exit codes as errors
	err := app.Run(args)
	return out.String(), err
}

package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/internal/procs"
)

func main() {
	procs.Serve() // a spare processor while rows are linked: see internal/procs
	app := newApp()
	err := applyConfig(app, os.Args)
	if err == nil {
		err = app.Run(os.Args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vecside:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		// An index definition's where= may hold commas: a list variable
		// (VECSIDE_INDEX) splits at newlines, and a flag is one item.
		SliceFlagSeparator: listSeparator,
		Name:               "vecside",
		Usage:              "vector search beside an unmodified PostgreSQL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"VECSIDE_LOG_LEVEL"}},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text (key=value lines) or json (one object a line, for log collectors)", EnvVars: []string{"VECSIDE_LOG_FORMAT"}},
			configFlag,
		},
		Before: func(c *cli.Context) error {
			h, err := logHandler(os.Stderr, c.String("log-level"), c.String("log-format"))
			if err != nil {
				return err
			}
			slog.SetDefault(slog.New(h))
			return nil
		},
		Commands: []*cli.Command{serveCommand, statusCommand, searchCommand, checkCommand, teardownCommand, passwdCommand, sqlCommand, demoCommand, cpuCommand, proxyCommand},
	}
}

// logHandler writes records of level and above to w, as text or JSON.
func logHandler(w io.Writer, level, format string) (slog.Handler, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

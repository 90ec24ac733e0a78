package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "vecside:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "vecside",
		Usage: "vector search beside an unmodified PostgreSQL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"VECSIDE_LOG_LEVEL"}},
		},
		Before: func(c *cli.Context) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			return nil
		},
		Commands: []*cli.Command{serveCommand, searchCommand, checkCommand, teardownCommand, passwdCommand, sqlCommand, demoCommand, benchCommand, cpuCommand},
	}
}

//go:build !cgo

package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// proxyCommand needs PostgreSQL's parser (pg_query, C): a binary built
// with CGO_ENABLED=0, as the static image is, says so.
var proxyCommand = &cli.Command{
	Name:            "proxy",
	Usage:           "not in this binary: it was built without cgo, which the proxy's SQL parser needs",
	SkipFlagParsing: true,
	Action: func(*cli.Context) error {
		return errors.New("this vecside was built with CGO_ENABLED=0; the proxy needs cgo (PostgreSQL's parser, pg_query): build with CGO_ENABLED=1 and a C compiler")
	},
}

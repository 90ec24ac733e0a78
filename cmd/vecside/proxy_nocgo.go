//go:build !cgo

package main

import (
	"context"
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
)

var errNoCgo = errors.New("this vecside was built with CGO_ENABLED=0; the proxy needs cgo (PostgreSQL's parser, pg_query): build with CGO_ENABLED=1 and a C compiler")

// proxyCommand needs PostgreSQL's parser (pg_query, C): a binary built
// with CGO_ENABLED=0, as the static image is, says so.
var proxyCommand = &cli.Command{
	Name:            "proxy",
	Usage:           "not in this binary: it was built without cgo, which the proxy's SQL parser needs",
	SkipFlagParsing: true,
	Action: func(*cli.Context) error {
		return errNoCgo
	},
}

// serveProxyFlags is serve's --proxy alone, which fails: the proxy's own
// flags come with it.
var serveProxyFlags = []cli.Flag{proxyFlag}

func serveProxy(context.Context, *cli.Context, *sidecar.Sidecar) error { return errNoCgo }

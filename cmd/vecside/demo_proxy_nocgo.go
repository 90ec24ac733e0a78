//go:build !cgo

package main

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/vecside/vecside/cmd/vecside/sidecar"
)

// demoHasProxy: this build's demo has no proxy.
const demoHasProxy = false

// demoProxy says that this build has no proxy, which needs cgo.
func demoProxy(_ context.Context, say func(string, ...any), _ *pgx.Conn, _ string, _ *sidecar.Sidecar, _ [][]float32, _ [][]float64) error {
	say("the proxy (vecside serve --proxy) is not in this build: it needs cgo")
	return nil
}

//go:build !cgo

package main

import "context"

// proxyBuilt: this binary has no proxy, which needs cgo (pg_query).
const proxyBuilt = false

func (b *bench) openProxy(context.Context, *vecsideTarget, bool) (*pathConns, error) {
	return nil, errProxyNotBuilt
}

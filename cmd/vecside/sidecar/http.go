package sidecar

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vecside/vecside/indexer"
)

// metricsHandler serves /metrics, which names indexes and asks for
// token as a bearer token if one is set (401 otherwise), and the probes.
func (sc *Sidecar) metricsHandler(reg *prometheus.Registry, token string) http.Handler {
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{sc}})
	mux := sc.probesHandler()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vecside metrics"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		metrics.ServeHTTP(w, r)
	})
	return mux
}

// probesHandler serves /healthz, 200 while the process answers, and
// /readyz, 200 once the sidecar can serve (see readiness) and 503 before.
// Neither names an index, table or error, since anyone who reaches the
// listener may ask: /readyz gives the number of indexes in each state.
func (sc *Sidecar) probesHandler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, counts := readiness(sc.Indexer.Status(), sc.cfg.ReadyRequiresAll)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "not ")
		}
		fmt.Fprintf(w, "ready: %s\n", counts)
	})
	return mux
}

// readiness says whether the sidecar should receive queries: no index is
// still on its first copy, at least one serves, and, if requireAll, none
// is in error or waiting. An index in error or waiting otherwise leaves
// the others serving; it shows in vecside_status() and the metrics.
// counts says how many indexes are in each state.
func readiness(statuses []indexer.Status, requireAll bool) (ready bool, counts string) {
	n := map[indexer.State]int{}
	for _, s := range statuses {
		n[s.State]++
	}
	var b strings.Builder
	for i, state := range []indexer.State{indexer.StateReady, indexer.StateBuilding, indexer.StateError, indexer.StateWaiting} {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d %s", n[state], state)
	}
	ready = n[indexer.StateBuilding] == 0 && n[indexer.StateReady] > 0 && (!requireAll || n[indexer.StateError]+n[indexer.StateWaiting] == 0)
	return ready, b.String()
}

// authorized checks the request's bearer token, in constant time.
func authorized(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// listen listens on addr for the named flag; an address in use gets an
// error naming the flag to change, as a second sidecar on the same host
// with the default addresses would meet.
func listen(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("--%s %s: the address is already in use (another vecside on this host?): give this one its own with --%s", flag, addr, flag)
	case err != nil:
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return ln, nil
}

// slogPrinter hands promhttp's errors to the sidecar's logger.
type slogPrinter struct{ sc *Sidecar }

func (p slogPrinter) Println(v ...any) { p.sc.log.Error("serving /metrics", "err", fmt.Sprint(v...)) }

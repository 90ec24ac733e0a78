package sidecar

import (
	"strings"
	"testing"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
)

func TestMetricsText(t *testing.T) {
	var s replicate.Stats
	s.Reconnects.Add(3)
	var b strings.Builder
	writeReplication(&b, &s)
	writeSearchLoad(&b, indexer.SearchLoad{Running: 2, Waiting: 5, Rejected: 7})
	for _, want := range []string{
		"# TYPE vecside_replication_reconnects_total counter\nvecside_replication_reconnects_total 3\n",
		"vecside_searches_running 2\n", "vecside_searches_waiting 5\n", "vecside_searches_rejected_total 7\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

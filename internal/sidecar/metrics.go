package sidecar

import (
	"fmt"
	"io"

	"github.com/vecside/vecside/indexer"
	"github.com/vecside/vecside/replicate"
)

// metric is one series of the Prometheus text format.
type metric struct {
	name, typ, help string
	value           int64
}

func writeMetrics(w io.Writer, ms []metric) {
	for _, m := range ms {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", m.name, m.help, m.name, m.typ, m.name, m.value)
	}
}

// writeReplication writes the replicator's counters.
func writeReplication(w io.Writer, s *replicate.Stats) {
	writeMetrics(w, []metric{
		{"vecside_replication_transactions_total", "counter", "Transactions applied from the stream.", s.Transactions.Load()},
		{"vecside_replication_changes_total", "counter", "Row changes applied from the stream.", s.Changes.Load()},
		{"vecside_replication_bad_keys_total", "counter", "Changes dropped because their key could not be read.", s.BadKeys.Load()},
		{"vecside_replication_unknown_messages_total", "counter", "pgoutput messages that did not parse and were skipped.", s.UnknownMessages.Load()},
		{"vecside_replication_repairs_total", "counter", "Rows read from the table for a change without its vector.", s.Repairs.Load()},
		{"vecside_replication_reconnects_total", "counter", "Times the stream was lost and reconnected.", s.Reconnects.Load()},
		{"vecside_replication_copied_rows_total", "counter", "Rows read by table copies.", s.CopiedRows.Load()},
		{"vecside_replication_confirmed_lsn", "gauge", "Flush position last confirmed to Postgres (exact below 2^53).", int64(s.Confirmed())},
	})
}

// writeSearchLoad writes the admission of searches.
func writeSearchLoad(w io.Writer, l indexer.SearchLoad) {
	writeMetrics(w, []metric{
		{"vecside_searches_running", "gauge", "Searches running now.", int64(l.Running)},
		{"vecside_searches_waiting", "gauge", "Searches waiting for a turn to run.", int64(l.Waiting)},
		{"vecside_searches_admitted_total", "counter", "Searches admitted to run.", l.Admitted},
		{"vecside_searches_rejected_total", "counter", "Searches turned away because too many were running and waiting (SQLSTATE 53000).", l.Rejected},
	})
}

package benchreport

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// FormatParams writes params as sorted key=value pairs, "default" when
// there are none.
func FormatParams(params map[string]float64) string {
	if len(params) == 0 {
		return "default"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		parts = append(parts, fmt.Sprintf("%s=%g", k, params[k]))
	}
	return strings.Join(parts, " ")
}

// WriteMarkdown writes the machine, the data set, the builds, every point
// and any write load as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	h := r.Header
	m, d := h.Machine, h.Dataset
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s with `%s`.\n\n", h.Started, h.Command)
	fmt.Fprintf(&b, "Machine: %s, %d cores, %.1f GiB; %s; %s; %s, shared_buffers %s", m.CPU, m.Cores,
		float64(m.MemoryBytes)/(1<<30), m.Kernel, m.Go, m.Postgres, m.SharedBuffers)
	if m.PGVector != "" {
		fmt.Fprintf(&b, "; pgvector %s", m.PGVector)
	}
	if m.RoundTripMicros > 0 {
		fmt.Fprintf(&b, "; `SELECT 1` round trip p50 %.0f µs at the start", m.RoundTripMicros)
	}
	b.WriteString(".\n\n")
	if x := h.Deployment; x != nil {
		b.WriteString("Deployment: ")
		var parts []string
		for _, c := range []struct{ who, cpus string }{{"Postgres", x.PostgresCPUs}, {"the bench (clients, sidecars, proxy)", x.BenchCPUs}, {"the vecside serve processes", x.SidecarCPUs}} {
			if c.cpus != "" {
				parts = append(parts, fmt.Sprintf("%s on CPUs %s", c.who, c.cpus))
			}
		}
		if x.PostgresMemoryLimit > 0 {
			parts = append(parts, fmt.Sprintf("Postgres's memory limited to %d MiB (cgroup %s), its peak %d MiB", x.PostgresMemoryLimit>>20, x.PostgresCgroup, x.PostgresMemoryPeak>>20))
		}
		b.WriteString(strings.Join(parts, "; ") + ".\n\n")
	}
	fmt.Fprintf(&b, "Data set: %s, %d rows × %d dimensions, %s, %d held-out queries, k=%d, ground truth %s", d.Name, d.Rows, d.Dims, d.Metric, d.Queries, d.K, d.Truth)
	if d.Column != "" {
		fmt.Fprintf(&b, ", read end to end from a %s column", d.Column)
	}
	fmt.Fprintf(&b, ". %d clients for the concurrent runs, %d queries per timed run. Postgres CPU is the user and system time of the database server's processes over a timed run, per query; - where it is not measured (a server named by --source). Sidecar CPU is the same for the vecside serve process, where it runs as one (--process).\n\n", h.Settings.Clients, h.Settings.Measured)

	b.WriteString("| system | index | build s | index bytes | bytes/row | RSS MiB | build settings |\n|---|---|--:|--:|--:|--:|---|\n")
	for _, x := range h.Builds {
		rss := "-"
		if x.RSSBytes > 0 {
			rss = fmt.Sprintf("%d (peak %d)", x.RSSBytes>>20, x.PeakRSSBytes>>20)
		}
		var set []string
		for _, k := range slices.Sorted(maps.Keys(x.Settings)) {
			set = append(set, k+"="+x.Settings[k])
		}
		seconds := fmt.Sprintf("%.1f", x.Seconds)
		if x.Outcome != "" {
			seconds = fmt.Sprintf("%s after %.1f", x.Outcome, x.Seconds)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.0f | %s | %s |\n", x.System, x.Index, seconds, x.IndexBytes, x.BytesPerRow, rss, strings.Join(set, ", "))
	}

	b.WriteString("\n| system | index | params | mode | clients | recall | candidates | QPS | p50 ms | p95 ms | p99 ms | Postgres CPU ms/query | sidecar CPU ms/query |\n|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Points {
		cands := "-"
		if p.CandidatesMean != nil {
			cands = fmt.Sprintf("%.1f", *p.CandidatesMean)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %.4f | %s | %.0f | %.3f | %.3f | %.3f | %s | %s |\n",
			p.System, p.Index, FormatParams(p.Params), p.Mode, p.Concurrency, p.Recall, cands, p.QPS, p.P50, p.P95, p.P99,
			optionalMS(p.PostgresCPU), optionalMS(p.SidecarCPU))
	}

	if len(r.Writes) > 0 {
		b.WriteString("\nUnder steady writes (single-row INSERTs from pgbench) while clients search at the index's default setting:\n\n")
		b.WriteString("| index | rows/s asked | rows/s written | rows/s applied | lag p50 ms | lag p99 ms | clients | search QPS | search p99 ms |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, x := range r.Writes {
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.2f | %.2f | %d | %.0f | %.3f |\n",
				x.Index, x.Rate, x.Written, x.ApplyRate, x.LagP50, x.LagP99, x.Concurrency, x.SearchQPS, x.SearchP99)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdownFile writes the Markdown to path.
func (r *Report) WriteMarkdownFile(path string) error {
	return writeFile(path, r.WriteMarkdown)
}

// optionalMS formats a figure in ms that may not have been measured.
func optionalMS(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *v)
}

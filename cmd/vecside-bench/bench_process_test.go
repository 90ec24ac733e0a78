package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vecside/vecside/cmd/vecside-bench/internal/benchreport"
	"github.com/vecside/vecside/internal/vecsidebin"
)

// TestBenchProcess: with --process each sidecar is a vecside serve child
// of the vecside command named, whose memory and CPU time per query the
// report gives; serve-proxy's statements go through the child's own
// proxy (a vecside built with cgo), whose work is the child's CPU.
func TestBenchProcess(t *testing.T) {
	vecside, paths := vecsidebin.Path(t), "sidecar,heapfetch"
	if proxyBuilt {
		vecside, paths = filepath.Join(t.TempDir(), "vecside"), paths+",serve-proxy"
		if out, err := exec.Command("go", "build", "-o", vecside, "github.com/vecside/vecside/cmd/vecside").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	out, md, err := tierBench(t, "--process", "--vecside", vecside, "--index", "kind=hnsw", "--paths", paths)
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	r := readReport(t, out)
	if len(r.Header.Builds) != 2 {
		t.Fatalf("builds %+v, want two", r.Header.Builds)
	}
	for _, b := range r.Header.Builds {
		if b.RSSBytes <= 0 || b.PeakRSSBytes < b.RSSBytes || b.IndexBytes <= 0 {
			t.Errorf("build %+v: want the child's resident memory, its peak and the index's size", b)
		}
	}
	if len(r.Points) == 0 {
		t.Fatal("no points")
	}
	proxied, alone := 0, 0
	for _, p := range r.Points {
		// Each index's own child answers its sidecar-only and proxied
		// queries.
		working := p.Mode == benchreport.SidecarOnly || p.Mode == benchreport.ServeProxy
		if p.SidecarCPU == nil || *p.SidecarCPU < 0 || working && *p.SidecarCPU == 0 {
			t.Errorf("%s %s %s c=%d: sidecar CPU %v, want the child's time per query", p.System, p.Index, p.Mode, p.Concurrency, p.SidecarCPU)
		}
		switch p.Mode {
		case benchreport.ServeProxy:
			proxied++
		case benchreport.SidecarOnly:
			alone++
		}
	}
	if want := map[bool]int{true: alone}[proxyBuilt]; proxied != want {
		t.Errorf("%d serve-proxy points, want %d (one per setting and concurrency)", proxied, want)
	}
}

// TestVecsideCommand: --process finds vecside where it is named, else on
// PATH (a test binary's directory holds none), and says how to get one.
func TestVecsideCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := vecsideCommand(""); err == nil || !strings.Contains(err.Error(), "go install ./cmd/vecside") {
		t.Errorf("no vecside anywhere: %v, want an error saying how to install it", err)
	}
	exe := filepath.Join(dir, "vecside")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := vecsideCommand(""); err != nil || got != exe {
		t.Errorf("vecside on PATH: %q, %v; want %s", got, err, exe)
	}
	if _, err := vecsideCommand(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "--vecside") {
		t.Errorf("--vecside naming nothing: %v, want an error naming the flag", err)
	}
}

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLeanBinary: the server binary links neither testing nor what only
// the bench needs (its plots and load generators), with cgo or without.
func TestLeanBinary(t *testing.T) {
	forbidden := []string{"testing", "gonum.org/", "/cmd/vecside-bench/internal/benchreport", "/internal/loadgen", "/internal/writeload", "/internal/workload", "/internal/pgtest"}
	for _, cgo := range []string{"0", "1"} {
		cmd := exec.Command("go", "list", "-deps", "github.com/vecside/vecside/cmd/vecside")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("CGO_ENABLED=%s go list: %v", cgo, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if pkg == f || strings.HasPrefix(pkg, f) || strings.HasSuffix(pkg, f) {
					t.Errorf("CGO_ENABLED=%s: cmd/vecside imports %s", cgo, pkg)
				}
			}
		}
	}
}

package readme_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayout holds README.md's package map to the module: a row for every
// package outside internal/ (and only for packages that exist), and every
// package under internal/ named in the internal/ row.
func TestLayout(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/vecside/vecside/"
	rows := map[string]string{} // first cell's package → the row
	cell := regexp.MustCompile("^\\| `([^`]+)` \\|")
	for _, line := range strings.Split(layout, "\n") {
		if m := cell.FindStringSubmatch(line); m != nil {
			rows[strings.TrimSuffix(m[1], "/")] = line
		}
	}
	var listed []string
	for _, path := range strings.Fields(string(out)) {
		pkg := strings.TrimPrefix(path, module)
		listed = append(listed, pkg)
		if leaf, ok := strings.CutPrefix(pkg, "internal/"); ok {
			if !strings.Contains(rows["internal"], "`"+leaf+"`") {
				t.Errorf("README.md's internal/ row does not name %s", pkg)
			}
			continue
		}
		if _, ok := rows[pkg]; !ok && !strings.Contains(layout, "`"+pkg+"`") {
			t.Errorf("README.md's Layout has no row for %s", pkg)
		}
	}
	for pkg := range rows {
		if pkg != "internal" && pkg != "docs/benchmarks" && !slices.Contains(listed, pkg) {
			t.Errorf("README.md's Layout lists %s, which go list does not", pkg)
		}
	}
}

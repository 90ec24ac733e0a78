// Package vecsidebin gives tests the vecside binary as users run it: the
// static build of cmd/vecside that scripts/test makes once and names in
// $VECSIDE_BIN, or, when a package's tests run alone, one built here
// once per test binary.
package vecsidebin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Path is the binary's path; a failed build fails the test.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if path = os.Getenv("VECSIDE_BIN"); path != "" {
			return
		}
		var dir string
		if dir, err = os.MkdirTemp("", "vecside-bin"); err != nil {
			return
		}
		path = filepath.Join(dir, "vecside")
		cmd := exec.Command("go", "build", "-o", path, "github.com/vecside/vecside/cmd/vecside")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, buildErr := cmd.CombinedOutput(); buildErr != nil {
			err = fmt.Errorf("go build: %v\n%s", buildErr, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

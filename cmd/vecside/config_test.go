package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vecside/vecside/replicate"
)

// runWithConfig runs the command line as main does: the --config file
// first, then the parser.
func runWithConfig(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"vecside", "--log-level", "error"}, args...)
	if err := applyConfig(newApp(), args); err != nil {
		return "", err
	}
	return run(t, args[3:]...)
}

// TestConfigPrecedence: a setting in the file gives way to its VECSIDE_*
// variable, which gives way to the flag; the file supplies required
// flags. serve reports the --memory-limit it was given before it connects
// anywhere, which shows which source won.
func TestConfigPrecedence(t *testing.T) {
	keepFlags(t, serveCommand)
	for _, v := range []string{"VECSIDE_MEMORY_LIMIT", "VECSIDE_SOURCE", "VECSIDE_INDEX", "VECSIDE_CONFIG"} {
		t.Setenv(v, "")
		os.Unsetenv(v) // applyConfig sets them; t.Setenv restores them after the test
	}
	file := filepath.Join(t.TempDir(), "vecside.yaml")
	err := os.WriteFile(file, []byte(`
source: host=/nonexistent dbname=x
index: ["a=t(v) key=id metric=l2", "b=u(v) key=id metric=cosine"]
memory-limit: from-file
checkpoint-interval: 1m
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runWithConfig(t, "serve", "--config", file)
	if err == nil || !strings.Contains(err.Error(), `"from-file"`) {
		t.Fatalf("file only: %v, want the file's memory-limit", err)
	}
	if got := os.Getenv("VECSIDE_INDEX"); got != "a=t(v) key=id metric=l2\nb=u(v) key=id metric=cosine" {
		t.Errorf("the file's index list became %q", got)
	}
	os.Unsetenv("VECSIDE_MEMORY_LIMIT")
	t.Setenv("VECSIDE_MEMORY_LIMIT", "from-env")
	_, err = runWithConfig(t, "serve", "--config", file)
	if err == nil || !strings.Contains(err.Error(), `"from-env"`) {
		t.Fatalf("file and environment: %v, want the environment's memory-limit", err)
	}
	_, err = runWithConfig(t, "--config="+file, "serve", "--memory-limit", "from-flag")
	if err == nil || !strings.Contains(err.Error(), `"from-flag"`) {
		t.Fatalf("file, environment and flag: %v, want the flag's memory-limit", err)
	}
}

// keepFlags restores cmd's flags when the test ends: urfave/cli writes
// the values it takes from the environment into the flags, which are the
// package's, and the next command run would start from them.
func keepFlags(t *testing.T, cmd *cli.Command) {
	saved := make([]reflect.Value, len(cmd.Flags))
	for i, f := range cmd.Flags {
		v := reflect.ValueOf(f).Elem()
		saved[i] = reflect.New(v.Type()).Elem()
		saved[i].Set(v)
	}
	t.Cleanup(func() {
		cmd.Flags = cmd.Flags[:len(saved)] // without the help flag a first run appends
		for i, f := range cmd.Flags {
			reflect.ValueOf(f).Elem().Set(saved[i])
		}
	})
}

func TestConfigErrors(t *testing.T) {
	t.Setenv("VECSIDE_CONFIG", "")
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		file string
		want string
	}{
		{[]string{"serve"}, "listn: 1.2.3.4:5", `"listn" is not a flag of vecside serve, nor of another command`},
		{[]string{"search"}, "k: 5", "--k cannot be set from a file"},
		{[]string{"serve"}, "index: [\"a=t(v) key=id\\nx\"]", "holds a line break"},
		{[]string{"serve"}, "listen: [", "--config"},
		{[]string{"serve"}, "config: other.yaml", `"config" is not a flag`},
	} {
		file := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(file, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"vecside", "--log-format", "json"}, c.args...)
		args = append(args, "--config", file)
		if err := applyConfig(newApp(), args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v with %q: %v, want an error saying %q", c.args, c.file, err, c.want)
		}
	}
	// One file for every command: status takes addr and leaves serve's keys.
	t.Setenv("VECSIDE_ADDR", "")
	os.Unsetenv("VECSIDE_ADDR")
	file := filepath.Join(dir, "all.yaml")
	if err := os.WriteFile(file, []byte("listen: 0.0.0.0:6433\naddr: 10.0.0.1:6433\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(newApp(), []string{"vecside", "status", "--config", file}); err != nil || os.Getenv("VECSIDE_ADDR") != "10.0.0.1:6433" || os.Getenv("VECSIDE_LISTEN") != "" {
		t.Errorf("status with a file for every command: %v; VECSIDE_ADDR %q, VECSIDE_LISTEN %q", err, os.Getenv("VECSIDE_ADDR"), os.Getenv("VECSIDE_LISTEN"))
	}
	if err := applyConfig(newApp(), []string{"vecside", "serve", "--config", filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Error("a missing config file was accepted")
	}
}

func TestLogFormat(t *testing.T) {
	var b bytes.Buffer
	h, err := logHandler(&b, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("copying", "rows", 7)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "copying" || rec["rows"] != float64(7) {
		t.Errorf("json log line %q: %v", b.String(), err)
	}
	if _, err := logHandler(&b, "info", "xml"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("--log-format xml: %v", err)
	}
	if _, err := run(t, "--log-format", "yaml", "cpu"); err == nil {
		t.Error("the command line took --log-format yaml")
	}
}

// TestCopyBars: the bar shows the table, the rows against the estimate,
// the build and the end.
func TestCopyBars(t *testing.T) {
	var b bytes.Buffer
	cb := newCopyBars(&b)
	for _, p := range []replicate.CopyProgress{
		{Table: "public.items", Phase: replicate.PhaseCopying, Rows: 500, Estimate: 1000},
		{Table: "public.items", Phase: replicate.PhaseCopying, Rows: 1200, Estimate: 1000},
		{Table: "public.items", Phase: replicate.PhaseBuilding, Rows: 1200, Estimate: 1000},
		{Table: "public.items", Phase: replicate.PhaseDone, Rows: 1200, Estimate: 1000, Elapsed: 3 * time.Second},
	} {
		cb.report(p)
	}
	out := b.String()
	for _, want := range []string{"copying public.items  50%", "(500/1000", "building the index of public.items 100%", "(1200/1200", "copied public.items: 1200 rows in 3s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress output lacks %q:\n%q", want, out)
		}
	}
	if len(cb.bars) != 0 {
		t.Error("a finished table keeps its bar")
	}
}

// TestServeFlagsHaveVariables: every setting of serve can come from the
// environment, and so from a --config file.
func TestServeFlagsHaveVariables(t *testing.T) {
	app := newApp()
	for _, f := range append(app.Flags, app.Command("serve").Flags...) {
		if f == cli.HelpFlag {
			continue // added by the parser
		}
		envs := f.(cli.DocGenerationFlag).GetEnvVars()
		if len(envs) == 0 || !strings.HasPrefix(envs[0], "VECSIDE_") {
			t.Errorf("--%s has no VECSIDE_* variable: %v", f.Names()[0], envs)
		}
	}
}

// TestHelpShowsOneDefault: a flag's help gives its default once, where a
// default that is a rule rather than a value is its DefaultText, not its
// zero value beside the rule in its usage.
func TestHelpShowsOneDefault(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				if help := f.String(); strings.Count(help, "(default") > 1 {
					t.Errorf("%s %s: %s", path, c.Name, help)
				}
			}
			walk(path+" "+c.Name, c.Subcommands)
		}
	}
	walk("vecside", newApp().Commands)
}

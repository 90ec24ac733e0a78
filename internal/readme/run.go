package readme

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vecside/vecside/internal/pgtest"
)

// Walk runs a Markdown file's named blocks in order, as a reader types
// them: sh blocks with bash, sql blocks with psql, in Dir with Env. A
// block that fails, or prints nothing that its Want matches, fails the
// test, with its output.
//
// vecside serve, which a reader leaves running in a terminal (or
// starts with a trailing &), runs in the background until the test
// ends; the next command waits until Ready answers 200.
//
// What the file leaves to the reader (hosts, ports, paths, passwords,
// vectors) is rewritten by Replace before a block runs, and a
// replacement that no block needs any more fails the test, so that the
// scheme cannot outlive the text it was written for.
type Walk struct {
	Dir     string
	Env     []string
	Replace []*Replacement
	// SQL is the psql connection string of each sql block, by name;
	// the file's prose says where each runs.
	SQL map[string]string
	// Want is what a block must print, by name.
	Want map[string]*regexp.Regexp
	// Stdin is every sh block's input: what a reader types when asked
	// (passwords).
	Stdin string
	// Ready is the URL of serve's /readyz.
	Ready string
	// Logs is where serve's output goes.
	Logs string

	exports string // the file of the variables the blocks exported
}

// Replacement rewrites the literal text Old as New or, with Pattern,
// every match of the pattern (Old then names it in messages).
type Replacement struct {
	Old, New string
	Pattern  *regexp.Regexp
	used     bool
}

// Run runs the named blocks of the file at path, and returns each one's
// output by name.
func (w *Walk) Run(t *testing.T, path string) map[string]string {
	t.Helper()
	blocks, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	w.exports = filepath.Join(t.TempDir(), "exports")
	outputs := map[string]string{}
	for _, b := range blocks {
		text := w.rewrite(b.Text)
		var out string
		switch b.Lang {
		case "sh":
			out = w.shell(t, path, b, text)
		case "sql":
			target, ok := w.SQL[b.Name]
			if !ok {
				t.Fatalf("%s:%d: the test does not know where ```sql %s runs", path, b.Line, b.Name)
			}
			out = w.run(t, path, b, []string{"psql", target, "-X", "-v", "ON_ERROR_STOP=1", "-f", "-"}, text)
		default:
			t.Fatalf("%s:%d: the test cannot run a ```%s block", path, b.Line, b.Lang)
		}
		if want := w.Want[b.Name]; want != nil && !want.MatchString(out) {
			t.Fatalf("%s:%d: ```%s %s printed no %s:\n%s", path, b.Line, b.Lang, b.Name, want, out)
		}
		outputs[b.Name] = out
	}
	for _, r := range w.Replace {
		if !r.used {
			t.Errorf("no block of %s holds %q any more: drop its replacement", path, r.Old)
		}
	}
	return outputs
}

func (w *Walk) rewrite(text string) string {
	for _, r := range w.Replace {
		if r.Pattern != nil {
			r.used = r.used || r.Pattern.MatchString(text)
			text = r.Pattern.ReplaceAllLiteralString(text, r.New)
		} else if strings.Contains(text, r.Old) {
			text, r.used = strings.ReplaceAll(text, r.Old, r.New), true
		}
	}
	return text
}

// shell runs a shell block's commands with bash, each run of them as one
// script, but vecside serve. What a script exports is seen by the
// scripts and the serve after it, as in a reader's terminal.
func (w *Walk) shell(t *testing.T, path string, b Block, text string) string {
	var out, script strings.Builder
	flush := func() {
		if script.Len() > 0 {
			s := w.restore() + script.String() + "\nexport -p > " + w.exports + "\n"
			out.WriteString(w.run(t, path, b, []string{"bash", "-euo", "pipefail", "-c", s}, w.Stdin))
			script.Reset()
		}
	}
	for _, cmd := range strings.SplitAfter(strings.ReplaceAll(text, "\\\n", ""), "\n") {
		if !strings.HasPrefix(cmd, "vecside serve ") {
			script.WriteString(cmd)
			continue
		}
		flush()
		w.serve(t, path, b, strings.TrimSuffix(strings.TrimSpace(cmd), "&"))
	}
	flush()
	return out.String()
}

// restore is the shell commands that export what earlier scripts did.
func (w *Walk) restore() string {
	return "if [ -e " + w.exports + " ]; then source " + w.exports + "; fi\n"
}

// run runs args with stdin as its input, and fails the test if it fails.
func (w *Walk) run(t *testing.T, path string, b Block, args []string, stdin string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin = w.Dir, w.Env, strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:%d ```%s %s: %s\n%s", path, b.Line, b.Lang, b.Name, args[0], out)
	if err != nil {
		t.Fatalf("%s:%d: ```%s %s failed: %v\n%s\n%s", path, b.Line, b.Lang, b.Name, err, args[len(args)-1], out)
	}
	return string(out)
}

// serve starts line in the background, stopped with SIGTERM when the
// test ends, and waits until w.Ready answers 200.
func (w *Walk) serve(t *testing.T, path string, b Block, line string) {
	log, err := os.Create(w.Logs)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	logs := func() string {
		b, _ := os.ReadFile(w.Logs)
		return string(b)
	}
	cmd := exec.Command("bash", "-c", w.restore()+"exec "+line)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = w.Dir, w.Env, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("vecside serve after SIGTERM: %v\n%s", err, logs())
		}
	})
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(w.Ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s:%d: vecside serve exited: %v\n%s", path, b.Line, err, logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:%d: vecside serve not ready after 2 minutes:\n%s", path, b.Line, logs())
		}
	}
}

// Path is a PATH that finds dirs first, then PostgreSQL's client
// programs ($PG_BINDIR, else Debian's PostgreSQL 15), then the
// process's own PATH.
func Path(dirs ...string) string {
	pg := os.Getenv("PG_BINDIR")
	if pg == "" {
		pg = pgtest.DefaultBinDir
	}
	return "PATH=" + strings.Join(append(dirs, pg, os.Getenv("PATH")), string(filepath.ListSeparator))
}

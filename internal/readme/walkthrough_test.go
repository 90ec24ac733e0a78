package readme_test

import (
	"context"
	"fmt"
	"net"
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
	"github.com/vecside/vecside/internal/readme"
	"github.com/vecside/vecside/internal/vecsidebin"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// password stands for every '...' of the README: the sidecar role's, and
// the password given to vecside passwd.
const password = "secret"

// vectorPlaceholder matches the README's query vectors ('[0.1,0.2,...]',
// '[...]', '{0.1,...}'); the test's column is real[] of three dimensions,
// whose literal knn also takes.
var vectorPlaceholder = regexp.MustCompile(`'[\[{][0-9.,]*\.\.\.[\]}]'`)

// sqlTargets says where each SQL block runs, as the prose around it says:
// role-setup as a superuser in the table's database, knn in psql logged in
// to the sidecar as app over TLS, checking its name against the CA, with
// the password psql would ask for.
var sqlTargets = map[string]func(w *walk) string{
	"role-setup": func(w *walk) string { return w.superuser },
	"knn": func(w *walk) string {
		return fmt.Sprintf("host=localhost port=%d user=app password=%s sslmode=verify-full sslrootcert=%s/etc/ca.crt", w.port, password, w.dir)
	},
}

// wantOutput is what a block must print: the row the read-your-writes
// block inserts is the nearest to the README's query vector, found by the
// sidecar at once and by the helpers after it.
var wantOutput = map[string]*regexp.Regexp{
	"quickstart":       regexp.MustCompile(`recall@10 = 1\.00.*\n(?s:.*)done; removing the throwaway database`),
	"serve":            regexp.MustCompile(`(?m)^ok +index items_embedding`),
	"knn":              regexp.MustCompile(`\(10 rows\)`),
	"search":           regexp.MustCompile(`(?m)^items_embedding +public\.items\(embedding\) +flat +ready +1000 `),
	"read-your-writes": regexp.MustCompile(`-\n +1000001 \| +0\n`),
	"sql-helpers":      regexp.MustCompile(`-\n +1000001 \| +0\n`),
}

// TestWalkthrough runs README.md's named blocks in order, as a new user
// types them, against a throwaway cluster whose table items(id,
// embedding) belongs to the application's role app: the demo, go
// install, the least-privilege role, a CA and certificate made with
// openssl, check, passwd, serve with TLS, knn from psql with verify-full,
// search and status, read-your-writes, and the SQL helpers. A command
// that no longer works fails the test, with its output.
//
// What the README leaves to the reader is substituted, and each
// substitution must still find its placeholder: /etc/vecside and
// /var/lib/vecside become directories of the test, the sidecar's host
// sidecar.internal is localhost and its port 6433 a free one, '...' is
// the password, and query vectors are three-dimensional. $DSN (the
// sidecar's role), $APP_DSN and $SUPERUSER_DSN are in the environment,
// as is VECSIDE_METRICS_LISTEN, a free port the test asks /readyz on.
func TestWalkthrough(t *testing.T) {
	ctx := context.Background()
	blocks, err := readme.Parse("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cluster := pgtest.Shared(t)
	su := pgtest.Connect(t, cluster.DSN("postgres"))
	t.Cleanup(func() {
		// After the database: roles are the cluster's.
		su.Exec(ctx, "DROP ROLE IF EXISTS vecside, app, vecside_user, vecside_owner")
	})
	w := &walk{t: t, dir: t.TempDir(), superuser: cluster.NewDatabase(t), port: freePort(t), metrics: freePort(t)}
	// The CA file is read by the database server too (the helpers'
	// verify-full), which runs as another user when the test is root.
	for _, d := range []string{filepath.Dir(w.dir), w.dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := pgtest.Connect(t, w.superuser)
	if _, err := db.Exec(ctx, `CREATE ROLE app LOGIN PASSWORD 'app-db';
		CREATE TABLE items (id bigint PRIMARY KEY, embedding real[], title text);
		INSERT INTO items SELECT i, ARRAY[sin(i), cos(i), i % 7], 'item ' || i FROM generate_series(1, 1000) i;
		ALTER TABLE items OWNER TO app`); err != nil {
		t.Fatal(err)
	}
	w.replace = []*replacement{
		{old: "/etc/vecside", new: w.dir + "/etc"},
		{old: "/var/lib/vecside", new: w.dir + "/data"},
		{old: "sidecar.internal", new: "localhost"},
		{old: "6433", new: fmt.Sprint(w.port)},
		{old: "'...'", new: "'" + password + "'"},
		// The binary scripts/test built, not a second build of it.
		{old: "go run ./cmd/vecside", new: "vecside"},
	}
	// The demo runs the binary scripts/test built; the install block's
	// go install puts another in GOBIN, first on PATH, for the blocks
	// after it.
	bin, prebuilt := filepath.Join(w.dir, "bin"), filepath.Join(w.dir, "prebuilt")
	pgBin := os.Getenv("PG_BINDIR")
	if pgBin == "" {
		pgBin = pgtest.DefaultBinDir
	}
	if err := os.Mkdir(prebuilt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(vecsidebin.Path(t), filepath.Join(prebuilt, "vecside")); err != nil {
		t.Fatal(err)
	}
	w.env = append(os.Environ(),
		"GOBIN="+bin,
		"PATH="+strings.Join([]string{bin, prebuilt, pgBin, os.Getenv("PATH")}, ":"),
		"DSN="+strings.Replace(w.superuser, "postgres://postgres@", "postgres://vecside:"+password+"@", 1),
		"APP_DSN="+strings.Replace(w.superuser, "postgres://postgres@", "postgres://app:app-db@", 1),
		"SUPERUSER_DSN="+w.superuser,
		fmt.Sprintf("VECSIDE_METRICS_LISTEN=127.0.0.1:%d", w.metrics))

	for _, b := range blocks {
		text := w.substitute(b.Text)
		var out string
		switch b.Lang {
		case "sh":
			out = w.shell(b, text)
		case "sql":
			target, ok := sqlTargets[b.Name]
			if !ok {
				t.Fatalf("README.md:%d: the test does not know where ```sql %s runs", b.Line, b.Name)
			}
			out = w.run(b, []string{"psql", target(w), "-X", "-v", "ON_ERROR_STOP=1", "-f", "-"}, text)
		default:
			t.Fatalf("README.md:%d: the test cannot run a ```%s block", b.Line, b.Lang)
		}
		if want := wantOutput[b.Name]; want != nil && !want.MatchString(out) {
			t.Fatalf("README.md:%d: ```%s %s printed no %s:\n%s", b.Line, b.Lang, b.Name, want, out)
		}
	}
	for _, r := range w.replace {
		if !r.used {
			t.Errorf("no block of README.md holds %q any more: drop its substitution", r.old)
		}
	}
	if w.serve == nil {
		t.Error("no block of README.md runs vecside serve")
	}
	if _, err := os.Stat(filepath.Join(bin, "vecside")); err != nil {
		t.Errorf("no block of README.md installs vecside: %v", err)
	}
}

// walk is the state the blocks share: the test's directory, the cluster,
// the ports and the sidecar that a block started.
type walk struct {
	t              *testing.T
	dir, superuser string
	port, metrics  int
	env            []string
	replace        []*replacement
	serve          *exec.Cmd
	serveLog       string // the file of serve's output
}

type replacement struct {
	old, new string
	used     bool
}

func (w *walk) substitute(text string) string {
	for _, r := range w.replace {
		if strings.Contains(text, r.old) {
			text, r.used = strings.ReplaceAll(text, r.old, r.new), true
		}
	}
	return vectorPlaceholder.ReplaceAllString(text, "'{0.1,0.2,0.3}'")
}

// shell runs a shell block's commands with bash, each run of them as one
// script (so that a variable set on one line is seen on the next), but
// vecside serve, which a reader leaves running in its terminal: the test
// starts it in the background and waits for /readyz.
func (w *walk) shell(b readme.Block, text string) string {
	var out, script strings.Builder
	flush := func() {
		if script.Len() > 0 {
			out.WriteString(w.run(b, []string{"bash", "-euo", "pipefail", "-c", script.String()}, password+"\n"))
			script.Reset()
		}
	}
	for _, cmd := range strings.SplitAfter(strings.ReplaceAll(text, "\\\n", ""), "\n") {
		if !strings.HasPrefix(cmd, "vecside serve ") {
			script.WriteString(cmd)
			continue
		}
		flush()
		w.startServe(b, cmd)
	}
	flush()
	return out.String()
}

// run runs args in the repository's root with stdin as its input, and
// fails the test if it fails.
func (w *walk) run(b readme.Block, args []string, stdin string) string {
	w.t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin = "../..", w.env, strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	w.t.Logf("README.md:%d ```%s %s: %s\n%s", b.Line, b.Lang, b.Name, args[0], out)
	if err != nil {
		w.t.Fatalf("README.md:%d: ```%s %s failed: %v\n%s\n%s", b.Line, b.Lang, b.Name, err, args[len(args)-1], out)
	}
	return string(out)
}

func (w *walk) startServe(b readme.Block, line string) {
	t := w.t
	if w.serve != nil {
		t.Fatalf("README.md:%d: a second vecside serve", b.Line)
	}
	w.serveLog = filepath.Join(w.dir, "serve.log")
	log, err := os.Create(w.serveLog)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	w.serve = exec.Command("bash", "-c", "exec "+line)
	w.serve.Dir, w.serve.Env, w.serve.Stdout, w.serve.Stderr = "../..", w.env, log, log
	if err := w.serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.serve.Wait() }()
	t.Cleanup(func() {
		w.serve.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("vecside serve after SIGTERM: %v\n%s", err, w.logs())
		}
	})
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", w.metrics)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("README.md:%d: vecside serve exited: %v\n%s", b.Line, err, w.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("README.md:%d: vecside serve not ready after 2 minutes:\n%s", b.Line, w.logs())
		}
	}
}

func (w *walk) logs() string {
	b, _ := os.ReadFile(w.serveLog)
	return string(b)
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

package deploy

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vecside/vecside/internal/pgtest"
	"github.com/vecside/vecside/internal/vecsidebin"
)

// The deployment files are checked against the binary itself: its flags
// and variables as serve --help lists them, its probe paths as a running
// serve answers them, and that it is static, as the minimal image needs.

// cliFlags are the flags of one vecside command line and its globals.
type cliFlags struct {
	flags    map[string]string // name → default ("" if none)
	envs     map[string]string // VECSIDE_* variable → flag name
	withEnvs map[string]bool   // flags that have a variable
}

var (
	helpFlag    = regexp.MustCompile(`^\s+--([a-z0-9-]+)`)
	helpDefault = regexp.MustCompile(`\(default: ([^)]*)\)(?: \[\$[^]]*\])?$`)
	helpEnvs    = regexp.MustCompile(`\[\$([A-Z0-9_, $]+)\]$`)
)

// flagsOf reads the flags vecside prints for --help of args.
func flagsOf(t *testing.T, args ...string) cliFlags {
	t.Helper()
	f := cliFlags{flags: map[string]string{}, envs: map[string]string{}, withEnvs: map[string]bool{}}
	for _, a := range [][]string{{"--help"}, append(args, "--help")} {
		out, err := exec.Command(vecsidebin.Path(t), a...).Output()
		if err != nil {
			t.Fatalf("vecside %v: %v", a, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			line := sc.Text()
			m := helpFlag.FindStringSubmatch(line)
			if m == nil || m[1] == "help" {
				continue
			}
			name := m[1]
			f.flags[name] = ""
			if d := helpDefault.FindStringSubmatch(line); d != nil {
				f.flags[name] = strings.Trim(d[1], `"`)
			}
			if e := helpEnvs.FindStringSubmatch(line); e != nil {
				for _, env := range strings.Split(e[1], ",") {
					env = strings.TrimPrefix(strings.TrimSpace(env), "$")
					f.envs[env], f.withEnvs[name] = name, true
				}
			}
		}
	}
	if len(f.flags) < 20 || f.flags["metrics-listen"] == "" || !f.withEnvs["index"] || !f.withEnvs["config"] {
		t.Fatalf("vecside %v --help: found too few flags: %v", args, f.flags)
	}
	return f
}

// checkArgs checks that every --flag in args is one of f's.
func (f cliFlags) checkArgs(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	given := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			continue
		}
		name, value, inline := strings.Cut(name, "=")
		if _, known := f.flags[name]; !known {
			t.Errorf("%s: --%s is not a flag of vecside serve", where, name)
			continue
		}
		if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			value = args[i+1]
			i++
		}
		given[name] = value
	}
	return given
}

// setting returns a flag's value as serve would see it: given on the
// command line, else in the config file, else its default.
func (f cliFlags) setting(given map[string]string, cfg map[string]any) func(name string) string {
	return func(name string) string {
		if v, ok := given[name]; ok {
			return v
		}
		if v, ok := cfg[name]; ok {
			return fmt.Sprint(v)
		}
		return f.flags[name]
	}
}

// checkConfig checks a --config file's keys and returns its settings.
func (f cliFlags) checkConfig(t *testing.T, where string, data []byte) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for key := range cfg {
		if !f.withEnvs[key] {
			t.Errorf("%s: %q is not a flag of vecside serve that a config file can set", where, key)
		}
	}
	if _, ok := cfg["index"].([]any); !ok {
		t.Errorf("%s: no index list", where)
	}
	return cfg
}

func port(t *testing.T, where, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("%s: %q is no host:port", where, addr)
	}
	return n
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestBinaryIsStatic: the image copies the binary onto distroless/static,
// which has no libc.
func TestBinaryIsStatic(t *testing.T) {
	f, err := elf.Open(vecsidebin.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader: build it with CGO_ENABLED=0")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
}

func TestDockerfile(t *testing.T) {
	flags := flagsOf(t, "serve")
	text := string(readFile(t, "Dockerfile"))
	if !strings.Contains(text, "CGO_ENABLED=0 go build") || !strings.Contains(text, "./cmd/vecside") {
		t.Error("Dockerfile: the binary is not built static from ./cmd/vecside")
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(VECSIDE_[A-Z_]+)=(\S+)`).FindAllStringSubmatch(text, -1) {
		env[m[1]] = m[2]
		if _, ok := flags.envs[m[1]]; !ok {
			t.Errorf("Dockerfile: %s is no variable of vecside serve", m[1])
		}
	}
	if !strings.Contains(text, "VOLUME "+env["VECSIDE_DATA_DIR"]+"\n") {
		t.Errorf("Dockerfile: no VOLUME at the data directory %q", env["VECSIDE_DATA_DIR"])
	}
	want := fmt.Sprintf("EXPOSE %d %d\n", port(t, "VECSIDE_LISTEN", env["VECSIDE_LISTEN"]), port(t, "VECSIDE_PROBES_LISTEN", env["VECSIDE_PROBES_LISTEN"]))
	if !strings.Contains(text, want) {
		t.Errorf("Dockerfile: want %q, the ports it listens on", want)
	}
	// The context is the repository: its history and the checkpoints of a
	// sidecar run there (serve's default --data-dir) stay out of it.
	var ignored []string
	for _, line := range strings.Split(string(readFile(t, "../.dockerignore")), "\n") {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			ignored = append(ignored, line)
		}
	}
	for _, want := range []string{".git", strings.Trim(flags.flags["data-dir"], `"`)} {
		if !slices.Contains(ignored, want) {
			t.Errorf(".dockerignore does not keep %s out of the build context: %v", want, ignored)
		}
	}
}

// pgSettings reads postgresql.vecside.conf.
func pgSettings(t *testing.T) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, "postgresql.vecside.conf")))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if k, v, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if out["wal_level"] != "logical" || out["max_replication_slots"] == "" || out["max_wal_senders"] == "" {
		t.Fatalf("postgresql.vecside.conf lacks a required setting: %v", out)
	}
	return out
}

func TestCompose(t *testing.T) {
	flags := flagsOf(t, "serve")
	var compose struct {
		Services map[string]struct {
			Image   string
			Build   struct{ Context, Dockerfile string }
			Command []string
			Env     map[string]string `yaml:"environment"`
			Volumes []string
			Ports   []string
		}
	}
	if err := yaml.Unmarshal(readFile(t, "compose.yaml"), &compose); err != nil {
		t.Fatal(err)
	}
	pg, side := compose.Services["postgres"], compose.Services["vecside"]
	if pg.Image == "" || len(side.Command) == 0 {
		t.Fatalf("compose.yaml: want services postgres and vecside: %+v", compose.Services)
	}
	for k, v := range pgSettings(t) {
		if !slices.Contains(pg.Command, k+"="+v) {
			t.Errorf("compose.yaml: postgres does not set %s=%s as postgresql.vecside.conf does", k, v)
		}
	}
	if _, err := os.Stat(filepath.Join(side.Build.Context, side.Build.Dockerfile)); err != nil {
		t.Errorf("compose.yaml: vecside's build: %v", err)
	}
	if side.Command[0] != "serve" {
		t.Errorf("compose.yaml: vecside runs %q, want serve", side.Command[0])
	}
	given := flags.checkArgs(t, "compose.yaml", side.Command[1:])
	for k := range side.Env {
		if _, ok := flags.envs[k]; !ok && strings.HasPrefix(k, "VECSIDE_") {
			t.Errorf("compose.yaml: %s is no variable of vecside serve", k)
		}
	}
	if side.Env["VECSIDE_SOURCE"] == "" {
		t.Error("compose.yaml: vecside has no VECSIDE_SOURCE")
	}
	var cfg map[string]any
	for _, v := range side.Volumes {
		src, dst, _ := strings.Cut(strings.TrimSuffix(v, ":ro"), ":")
		if dst == given["config"] {
			cfg = flags.checkConfig(t, src, readFile(t, src))
		}
	}
	if cfg == nil {
		t.Fatalf("compose.yaml: no volume holds --config %s", given["config"])
	}
	setting := flags.setting(given, cfg)
	for _, listen := range []string{"listen", "probes-listen", "metrics-listen"} {
		p := port(t, listen, setting(listen))
		if !slices.ContainsFunc(side.Ports, func(s string) bool { return strings.HasSuffix(s, ":"+strconv.Itoa(p)) }) {
			t.Errorf("compose.yaml: --%s port %d is not published: %v", listen, p, side.Ports)
		}
	}
	if !slices.ContainsFunc(side.Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+setting("data-dir")) }) {
		t.Errorf("compose.yaml: no volume at --data-dir %s", setting("data-dir"))
	}
}

// k8s is the part of Kubernetes objects the test reads.
type k8s struct {
	Kind     string
	Metadata struct {
		Name   string
		Labels map[string]string
	}
	Data map[string]string
	Spec struct {
		ServiceName string `yaml:"serviceName"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		ServiceSelector map[string]string
		Ports           []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Containers []container
				Volumes    []struct {
					Name      string
					ConfigMap *struct{ Name string } `yaml:"configMap"`
					Secret    *struct {
						Items []struct{ Key, Path string }
					}
				}
			}
		}
		VolumeClaimTemplates []struct {
			Metadata struct{ Name string }
		} `yaml:"volumeClaimTemplates"`
	}
}

type probe struct {
	HTTPGet struct {
		Path string
		Port string
	} `yaml:"httpGet"`
}

type container struct {
	Args []string
	Env  []struct {
		Name      string
		Value     string
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	Ports []struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
	}
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests, Limits map[string]string
	}
	VolumeMounts []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func readManifests(t *testing.T) map[string]k8s {
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, "kubernetes/vecside.yaml")))
	out := map[string]k8s{}
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := yaml.Marshal(raw)
		// A Service's selector is a plain map, a StatefulSet's holds
		// matchLabels: read it both ways.
		var obj k8s
		var svc struct {
			Spec struct{ Selector map[string]string }
		}
		if err := yaml.Unmarshal(data, &obj); err != nil && obj.Kind != "Service" {
			t.Fatalf("%s: %v", obj.Kind, err)
		}
		yaml.Unmarshal(data, &svc)
		obj.Spec.ServiceSelector = svc.Spec.Selector
		out[obj.Kind+"/"+obj.Metadata.Name] = obj
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	flags := flagsOf(t, "serve")
	objs := readManifests(t)
	sts, ok := objs["StatefulSet/vecside"]
	if !ok || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no StatefulSet vecside with one container: %v", objs)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "serve" {
		t.Fatalf("the container runs %q, want serve", c.Args[0])
	}
	given := flags.checkArgs(t, "StatefulSet args", c.Args[1:])

	// The config file comes from the ConfigMap mounted where --config says.
	var cfg map[string]any
	mounts := map[string]string{} // volume → path
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := objs["ConfigMap/"+v.ConfigMap.Name]
		for file, text := range cm.Data {
			if filepath.Join(mounts[v.Name], file) == given["config"] {
				cfg = flags.checkConfig(t, "ConfigMap "+cm.Metadata.Name, []byte(text))
			}
		}
	}
	if cfg == nil {
		t.Fatalf("no ConfigMap is mounted at --config %s", given["config"])
	}
	setting := flags.setting(given, cfg)

	// Each pod its own slot: --name from the pod's name.
	var ownName bool
	for _, e := range c.Env {
		if _, ok := flags.envs[e.Name]; !ok && strings.HasPrefix(e.Name, "VECSIDE_") {
			t.Errorf("container env: %s is no variable of vecside serve", e.Name)
		}
		ownName = ownName || e.Name == "VECSIDE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}
	if !ownName {
		t.Error("VECSIDE_NAME is not the pod's name: the pods would share one slot")
	}

	// Ports and probes match what the sidecar listens on.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, flag := range map[string]string{"pgwire": "listen", "probes": "probes-listen", "metrics": "metrics-listen"} {
		if want := port(t, flag, setting(flag)); ports[name] != want {
			t.Errorf("containerPort %s is %d, but --%s is %s", name, ports[name], flag, setting(flag))
		}
	}
	for _, p := range []struct {
		name  string
		probe *probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != "probes" {
			t.Errorf("%s probe: %+v, want GET %s on the probes port", p.name, p.probe, p.path)
		}
	}

	// Checkpoints on the pod's own volume, secrets where the config reads them.
	if len(sts.Spec.VolumeClaimTemplates) != 1 || mounts[sts.Spec.VolumeClaimTemplates[0].Metadata.Name] != setting("data-dir") {
		t.Errorf("no volume claim mounted at --data-dir %s", setting("data-dir"))
	}
	for _, flag := range []string{"users", "metrics-token-file"} {
		if path := setting(flag); path != "" && !slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v struct {
			Name      string
			ConfigMap *struct{ Name string } `yaml:"configMap"`
			Secret    *struct {
				Items []struct{ Key, Path string }
			}
		}) bool {
			return v.Secret != nil && slices.ContainsFunc(v.Secret.Items, func(i struct{ Key, Path string }) bool {
				return filepath.Join(mounts[v.Name], i.Path) == path
			})
		}) {
			t.Errorf("--%s %s: no secret is mounted there", flag, path)
		}
	}

	// Resources: requested, and the soft limit below the hard one.
	if c.Resources.Requests["memory"] == "" || c.Resources.Requests["cpu"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources: %+v, want memory and cpu requests and a memory limit", c.Resources)
	}
	var soft string
	for _, e := range c.Env {
		if e.Name == "VECSIDE_MEMORY_LIMIT" {
			soft = e.Value
		}
	}
	if mib(t, soft) >= mib(t, c.Resources.Limits["memory"]) || mib(t, c.Resources.Requests["memory"]) > mib(t, c.Resources.Limits["memory"]) {
		t.Errorf("--memory-limit %s, request %s, limit %s: want request ≤ limit and the soft limit below it", soft, c.Resources.Requests["memory"], c.Resources.Limits["memory"])
	}

	// Services select the pods and point at their ports.
	labels := sts.Spec.Template.Metadata.Labels
	for key, obj := range objs {
		if obj.Kind != "Service" {
			continue
		}
		for k, v := range obj.Spec.ServiceSelector {
			if labels[k] != v {
				t.Errorf("%s selects %s=%s, which the pods lack", key, k, v)
			}
		}
		for _, p := range obj.Spec.Ports {
			if ports[p.TargetPort] != p.Port {
				t.Errorf("%s: port %s %d targets %q, whose containerPort is %d", key, p.Name, p.Port, p.TargetPort, ports[p.TargetPort])
			}
		}
	}
	if _, ok := objs["Service/"+sts.Spec.ServiceName]; !ok {
		t.Errorf("the StatefulSet's serviceName %q is no Service", sts.Spec.ServiceName)
	}
	for k, v := range sts.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the StatefulSet selects %s=%s, which its pods lack", k, v)
		}
	}
}

// headerCommand is the shell command of the manifest's header comment
// that starts with prefix, its continued lines joined.
func headerCommand(t *testing.T, prefix string) string {
	t.Helper()
	var cmd strings.Builder
	for _, line := range strings.Split(string(readFile(t, "kubernetes/vecside.yaml")), "\n") {
		line, ok := strings.CutPrefix(line, "#   ")
		if !ok || cmd.Len() == 0 && !strings.HasPrefix(line, prefix) {
			continue
		}
		line, more := strings.CutSuffix(strings.TrimSpace(line), "\\")
		cmd.WriteString(line)
		if !more {
			return cmd.String()
		}
	}
	t.Fatalf("kubernetes/vecside.yaml: no command %q in its header", prefix)
	return ""
}

// TestKubernetesSecret: the header's kubectl create secret makes every
// key of the secret that the pods read, in one command.
func TestKubernetesSecret(t *testing.T) {
	made := map[string]bool{}
	for _, m := range regexp.MustCompile(`--from-(?:literal|file)=([a-z-]+)=`).FindAllStringSubmatch(headerCommand(t, "kubectl create secret generic vecside "), -1) {
		made[m[1]] = true
	}
	c := readManifests(t)["StatefulSet/vecside"].Spec.Template.Spec
	var read []string
	for _, e := range c.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			read = append(read, e.ValueFrom.SecretKeyRef.Key)
		}
	}
	for _, v := range c.Volumes {
		if v.Secret != nil {
			for _, i := range v.Secret.Items {
				read = append(read, i.Key)
			}
		}
	}
	if len(read) == 0 {
		t.Fatal("the pods read no secret")
	}
	for _, key := range read {
		if !made[key] {
			t.Errorf("the pods read key %s of the secret, which the header's kubectl create secret does not make (made: %v)", key, made)
		}
	}
}

// TestKubernetesPublications runs the DBA's publications.sql as its header
// says, for the ConfigMap's index, and shows that every pod's --name then
// passes vecside check as a role that only reads the table and
// replicates; a second run changes nothing.
func TestKubernetesPublications(t *testing.T) {
	ctx := context.Background()
	script := "kubernetes/publications.sql"
	text := string(readFile(t, script))
	var def string
	for _, obj := range readManifests(t) {
		if cfg := obj.Data["vecside.yaml"]; cfg != "" {
			def = regexp.MustCompile(`(?m)^\s+- (\S+=.*)$`).FindStringSubmatch(cfg)[1]
		}
	}
	m := regexp.MustCompile(`=(\w+)\.(\w+)\((\w+)\) key=(\w+)`).FindStringSubmatch(def)
	if m == nil {
		t.Fatalf("the ConfigMap's --index %q", def)
	}
	if want := fmt.Sprintf("FOR TABLE %s.%s (%s, %s)", m[1], m[2], m[4], m[3]); !strings.Contains(text, want) {
		t.Errorf("%s does not publish the ConfigMap's index: want %q", script, want)
	}
	user := regexp.MustCompile(`user=(\w+)`).FindStringSubmatch(headerCommand(t, "kubectl create secret generic vecside "))[1]
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN REPLICATION; CREATE TABLE %s.%s (%s bigint PRIMARY KEY, %s real[], body text)`, user, m[1], m[2], m[4], m[3])); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(ctx, fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", user)) })
	header := regexp.MustCompile(`psql "\$SUPERUSER_DSN" (.*) -f deploy/kubernetes/publications.sql`).FindStringSubmatch(text)
	if header == nil {
		t.Fatalf("%s: its header does not say how to run it", script)
	}
	bin := os.Getenv("PG_BINDIR")
	if bin == "" {
		bin = pgtest.DefaultBinDir
	}
	for range 2 {
		args := append([]string{dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1"}, strings.Fields(header[1])...)
		if out, err := exec.Command(filepath.Join(bin, "psql"), append(args, "-f", script)...).CombinedOutput(); err != nil {
			t.Fatalf("psql -f %s: %v\n%s", script, err, out)
		}
	}
	pods, err := strconv.Atoi(strings.TrimPrefix(strings.Fields(header[1])[1], "replicas="))
	if err != nil {
		t.Fatal(err)
	}
	asRole := strings.Replace(dsn, "postgres://postgres@", "postgres://"+user+"@", 1)
	for n := range pods {
		pod := fmt.Sprintf("vecside-%d", n)
		out, err := exec.Command(vecsidebin.Path(t), "check", "--source", asRole, "--name", pod, "--index", def).CombinedOutput()
		if err != nil || strings.Contains(string(out), "FAIL") {
			t.Errorf("vecside check for pod %s: %v\n%s", pod, err, out)
		}
	}
}

// mib reads a Kubernetes or vecside memory quantity (Mi, Gi, MiB, GiB).
func mib(t *testing.T, q string) float64 {
	t.Helper()
	for suffix, mult := range map[string]float64{"MiB": 1, "GiB": 1024, "Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			if v, err := strconv.ParseFloat(n, 64); err == nil {
				return v * mult
			}
		}
	}
	t.Fatalf("memory quantity %q: want Mi, Gi, MiB or GiB", q)
	return 0
}

func TestSystemdUnit(t *testing.T) {
	flags := flagsOf(t, "serve")
	unit := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, "systemd/vecside.service")))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			unit[k] = v
		}
	}
	exec := strings.Fields(unit["ExecStart"])
	if len(exec) < 2 || filepath.Base(exec[0]) != "vecside" || exec[1] != "serve" {
		t.Fatalf("ExecStart %q: want vecside serve", unit["ExecStart"])
	}
	given := flags.checkArgs(t, "ExecStart", exec[2:])
	if "/var/lib/"+unit["StateDirectory"] != given["data-dir"] {
		t.Errorf("StateDirectory %s is not --data-dir %s", unit["StateDirectory"], given["data-dir"])
	}
	flags.checkConfig(t, "vecside.yaml", readFile(t, "vecside.yaml"))
	if unit["User"] == "" || unit["Restart"] == "" || unit["TimeoutStopSec"] == "" {
		t.Errorf("the unit lacks User, Restart or TimeoutStopSec: %v", unit)
	}
}

// TestProbePaths runs the static binary as the files do, with the
// probes on their own listener, and asks it the probe paths the
// manifests name: each answers (200 or 503), and /metrics is not there.
func TestProbePaths(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db := pgtest.Connect(t, dsn)
	if _, err := db.Exec(ctx, `CREATE TABLE items (id bigint PRIMARY KEY, embedding real[]);
		INSERT INTO items SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 100) g`); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probes := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(vecsidebin.Path(t), "serve", "--source", dsn, "--auth", "trust", "--listen", "127.0.0.1:0",
		"--metrics-listen", "", "--probes-listen", probes, "--data-dir", t.TempDir(), "--name", "probe-test-0",
		"--index", "items_embedding=public.items(embedding) key=id metric=cosine kind=hnsw")
	cmd.Env = append(os.Environ(), "VECSIDE_LOG_FORMAT=json")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("vecside serve after SIGTERM: %v\n%s", err, logs.String())
		}
	}()
	var sts k8s
	for _, obj := range readManifests(t) {
		if obj.Kind == "StatefulSet" {
			sts = obj
		}
	}
	c := sts.Spec.Template.Spec.Containers[0]
	get := func(path string) int {
		resp, err := http.Get("http://" + probes + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(time.Minute)
	for get(c.ReadinessProbe.HTTPGet.Path) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within a minute:\n%s", c.ReadinessProbe.HTTPGet.Path, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := get(c.LivenessProbe.HTTPGet.Path); code != http.StatusOK {
		t.Errorf("%s: %d", c.LivenessProbe.HTTPGet.Path, code)
	}
	if code := get("/metrics"); code != http.StatusNotFound {
		t.Errorf("the probes listener answers /metrics: %d", code)
	}
	var slot string
	if err := db.QueryRow(ctx, `SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE 'probe%'`).Scan(&slot); err != nil || slot != "probe_test_0" {
		t.Errorf("slot of --name probe-test-0: %q %v, want probe_test_0", slot, err)
	}
}

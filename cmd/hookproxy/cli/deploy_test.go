package cli

// Docker is not available where the tests run, so the deployment files are checked the way
// docker would read them: the compose file parses and wires what it claims, every file it
// mounts exists and passes `hookproxy validate`, the Dockerfile's shape is right, and the
// compose topology (proxy → policy server over AHP HTTP → model imitation) works when run
// as processes on loopback.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/backend"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/fakemodel"
	"github.com/hookproxy/hookproxy/policies"
	"github.com/hookproxy/hookproxy/proxy"
)

// repoRoot is the module root, three levels above this package.
const repoRoot = "../../.."

type composeFile struct {
	Services map[string]struct {
		Image       string   `yaml:"image"`
		Build       any      `yaml:"build"`
		Command     []string `yaml:"command"`
		Volumes     []string `yaml:"volumes"`
		Ports       []string `yaml:"ports"`
		Profiles    []string `yaml:"profiles"`
		NetworkMode string   `yaml:"network_mode"`
		DependsOn   []string `yaml:"depends_on"`
	} `yaml:"services"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return c
}

// flagValue returns the value after flag in args.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"hookproxy", "policy-server", "fake-model"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("service %s is missing", name)
		}
		if s.Image == "" || s.Build == nil || len(s.Command) == 0 {
			t.Errorf("%s: image %q, build %v, command %q: every service builds and runs the hookproxy image", name, s.Image, s.Build, s.Command)
		}
		// Every mounted file exists, and every --config names a mounted file.
		mounted := map[string]string{}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("%s: volume %q", name, v)
				continue
			}
			src := filepath.Join(repoRoot, parts[0])
			if _, err := os.Stat(src); err != nil {
				t.Errorf("%s: mounts %s, which does not exist", name, parts[0])
			}
			mounted[parts[1]] = src
		}
		if cfg := flagValue(s.Command, "--config"); cfg != "" && mounted[cfg] == "" {
			t.Errorf("%s: --config %s is not mounted", name, cfg)
		}
	}
	hp, ps, fm := c.Services["hookproxy"], c.Services["policy-server"], c.Services["fake-model"]
	if hp.Command[0] != "serve" || ps.Command[0] != "backend" || fm.Command[0] != "fake-model" {
		t.Errorf("commands: %q %q %q", hp.Command, ps.Command, fm.Command)
	}
	if !slices.Contains(fm.Profiles, "demo") || len(hp.Profiles) != 0 || len(ps.Profiles) != 0 {
		t.Errorf("profiles: fake-model %v (want demo), hookproxy %v, policy-server %v", fm.Profiles, hp.Profiles, ps.Profiles)
	}
	// The policy server is reached over loopback: it must share hookproxy's network namespace
	// and listen on loopback there.
	if ps.NetworkMode != "service:hookproxy" || !strings.HasPrefix(flagValue(ps.Command, "--listen"), "127.0.0.1:") {
		t.Errorf("policy-server: network_mode %q, listen %q", ps.NetworkMode, flagValue(ps.Command, "--listen"))
	}
	if !slices.Contains(hp.Ports, "127.0.0.1:8080:8080") {
		t.Errorf("hookproxy ports %v", hp.Ports)
	}
}

// TestDeployConfigsValidate runs `hookproxy validate` on every configuration the compose
// file and the image use, and checks the policy server's registration.
func TestDeployConfigsValidate(t *testing.T) {
	validate := func(t *testing.T, path string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run([]string{"validate", "--config", path}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
			t.Errorf("hookproxy validate --config %s: exit %d\n%s", path, code, stderr.String())
		}
	}
	t.Run("compose hookproxy.yaml", func(t *testing.T) {
		validate(t, filepath.Join(repoRoot, "deploy/compose/hookproxy.yaml"))
	})
	t.Run("compose policies.json", func(t *testing.T) {
		doc, problems, err := registration.Load(filepath.Join(repoRoot, "deploy/compose/policies.json"), app.RegistrationOptions())
		if err != nil || len(problems) > 0 {
			t.Fatalf("%v %v", err, problems)
		}
		srv, err := backend.New(doc, policies.Factories(), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = srv.Close()
	})
	t.Run("image hookproxy.yaml", func(t *testing.T) {
		// Laid out as the Dockerfile does: the config with the default registration beside it.
		dir := t.TempDir()
		copyFile(t, filepath.Join(repoRoot, "deploy/docker/hookproxy.yaml"), filepath.Join(dir, "hookproxy.yaml"))
		copyFile(t, filepath.Join(repoRoot, "config/default-registration.json"), filepath.Join(dir, "registration.json"))
		validate(t, filepath.Join(dir, "hookproxy.yaml"))
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms, copies []string
	var user, entry, cmd string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, strings.Join(f[1:], " "))
		case "COPY":
			if !strings.HasPrefix(f[1], "--from") && f[1] != "." {
				copies = append(copies, f[1:len(f)-1]...)
			}
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entry = strings.Join(f[1:], " ")
		case "CMD":
			cmd = strings.Join(f[1:], " ")
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:1.26 AS") ||
		!(strings.HasPrefix(froms[1], "gcr.io/distroless/static") || strings.HasPrefix(froms[1], "alpine")) {
		t.Errorf("stages %q: want golang:1.26 then a minimal base", froms)
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("USER %q: the image must not run as root", user)
	}
	if entry != `["hookproxy"]` || cmd != `["serve"]` {
		t.Errorf("ENTRYPOINT %s CMD %s", entry, cmd)
	}
	for _, want := range []string{"CGO_ENABLED=0", "EXPOSE 8080 9090"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, src := range copies {
		if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
			t.Errorf("COPY %s: %v", src, err)
		}
	}
}

// TestComposeTopology runs the compose services as in-process servers on loopback — the
// policy server from deploy/compose/policies.json, the model imitation, and hookproxy from
// deploy/compose/hookproxy.yaml and its registration with only the addresses changed — and
// sends the demo's requests through the /demo routes.
func TestComposeTopology(t *testing.T) {
	doc, _, err := registration.Load(filepath.Join(repoRoot, "deploy/compose/policies.json"), app.RegistrationOptions())
	if err != nil {
		t.Fatal(err)
	}
	ps, err := backend.New(doc, policies.Factories(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	policyServer := httptest.NewServer(ps.Handler())
	defer policyServer.Close()
	fm := fakemodel.New()
	model := httptest.NewServer(fm.Handler())
	defer model.Close()

	dir := t.TempDir()
	regData, err := os.ReadFile(filepath.Join(repoRoot, "deploy/compose/registration.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(regData, []byte("http://127.0.0.1:8787/")) {
		t.Fatal("the compose registration no longer names the policy server at http://127.0.0.1:8787/")
	}
	writeFile(t, dir, "registration.json", strings.ReplaceAll(string(regData), "http://127.0.0.1:8787/", policyServer.URL+"/"))
	cfgData, err := os.ReadFile(filepath.Join(repoRoot, "deploy/compose/hookproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := writeFile(t, dir, "hookproxy.yaml", strings.ReplaceAll(string(cfgData), "http://fake-model:8000", model.URL))
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Audit.Path = "" // the compose file logs decisions to stdout; not in a test
	ch, err := app.BuildChain(cfg, cfg.Source, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	srv, err := proxy.New(cfg, ch, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hp := httptest.NewServer(srv)
	defer hp.Close()

	chat := func(prompt string) (int, string) {
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []map[string]string{{"role": "user", "content": prompt}}})
		resp, err := http.Post(hp.URL+"/demo/openai/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	t.Run("secret redacted before the model", func(t *testing.T) {
		status, body := chat("ship it with " + demoSecret + " now")
		received, _ := fm.Received()
		if status != http.StatusOK || strings.Contains(body, demoSecret) || strings.Contains(string(received), demoSecret) ||
			!strings.Contains(string(received), "ship it with [REDACTED:aws_access_key_id:") {
			t.Errorf("status %d, answer %s, upstream received %s", status, body, received)
		}
	})
	t.Run("destructive tool call removed", func(t *testing.T) {
		status, body := chat("clean up")
		checkToolCallRemoved(t, status, body)
	})
}

// TestComposeHAProfile: the `ha` profile is Redis, two replicas (each with its policy
// server sidecar) whose configuration puts the conversation state on that Redis, and a
// load balancer that sends to both; the replicas' configuration passes validate.
func TestComposeHAProfile(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"redis", "hookproxy-a", "policy-server-a", "hookproxy-b", "policy-server-b", "lb"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("service %s is missing", name)
		}
		if !slices.Equal(s.Profiles, []string{"ha"}) {
			t.Errorf("%s: profiles %v, want [ha]", name, s.Profiles)
		}
		for _, v := range s.Volumes {
			if src := strings.Split(v, ":")[0]; src != "" {
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("%s: mounts %s, which does not exist", name, src)
				}
			}
		}
	}
	if !strings.HasPrefix(c.Services["redis"].Image, "redis:") {
		t.Errorf("redis image %q", c.Services["redis"].Image)
	}
	for _, r := range []string{"a", "b"} {
		hp, ps := c.Services["hookproxy-"+r], c.Services["policy-server-"+r]
		if hp.Command[0] != "serve" || flagValue(hp.Command, "--config") != "/etc/hookproxy/compose/hookproxy-ha.yaml" ||
			!slices.Contains(hp.DependsOn, "redis") {
			t.Errorf("hookproxy-%s: command %q, depends_on %v", r, hp.Command, hp.DependsOn)
		}
		if ps.NetworkMode != "service:hookproxy-"+r {
			t.Errorf("policy-server-%s: network_mode %q", r, ps.NetworkMode)
		}
	}
	conf, err := os.ReadFile(filepath.Join(repoRoot, "deploy/compose/nginx-ha.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server hookproxy-a:8080;", "server hookproxy-b:8080;", "proxy_buffering off;"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx-ha.conf lacks %q", want)
		}
	}
	if lb := c.Services["lb"]; !slices.Contains(lb.Ports, "127.0.0.1:8088:8080") {
		t.Errorf("lb ports %v", lb.Ports)
	}
	cfg, err := config.Load(filepath.Join(repoRoot, "deploy/compose/hookproxy-ha.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.Backend != config.StateRedisBackend || cfg.State.Redis.URL != "redis://redis:6379/0" {
		t.Errorf("hookproxy-ha.yaml state %+v", cfg.State)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--config", filepath.Join(repoRoot, "deploy/compose/hookproxy-ha.yaml")}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
		t.Errorf("hookproxy validate hookproxy-ha.yaml: exit %d\n%s", code, stderr.String())
	}
}

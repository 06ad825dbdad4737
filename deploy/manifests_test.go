package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kernpool/kernpool/pool/daemon"
)

// kustomizations are the directories `kubectl apply -k` takes: the
// manifests as shipped and the test cluster's overlay.
var kustomizations = []string{"kubernetes", "../integration/k8s/overlay"}

// obj is one manifest document, decoded loosely.
type obj = map[string]any

func get(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(obj)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func list(o any, path ...string) []any {
	l, _ := get(o, path...).([]any)
	return l
}

func str(o any, path ...string) string {
	s, _ := get(o, path...).(string)
	return s
}

// readDocs decodes every document of every .yaml file under dir.
func readDocs(t *testing.T, dir string) map[string][]obj {
	t.Helper()
	out := map[string][]obj{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		for {
			var o obj
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if o != nil {
				out[path] = append(out[path], o)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestManifestsWellFormed: every document names its kind, API version
// and name; every kustomization lists files and directories that exist.
func TestManifestsWellFormed(t *testing.T) {
	for _, dir := range kustomizations {
		for path, docs := range readDocs(t, dir) {
			for _, d := range docs {
				if filepath.Base(path) == "kustomization.yaml" {
					checkKustomization(t, path, d)
					continue
				}
				if str(d, "apiVersion") == "" || str(d, "kind") == "" || str(d, "metadata", "name") == "" {
					t.Errorf("%s: a document without apiVersion, kind or metadata.name: %v", path, d)
				}
			}
		}
	}
}

func checkKustomization(t *testing.T, path string, k obj) {
	t.Helper()
	dir := filepath.Dir(path)
	var refs []string
	for _, r := range list(k, "resources") {
		refs = append(refs, r.(string))
	}
	for _, p := range list(k, "patches") {
		refs = append(refs, str(p, "path"))
	}
	for _, g := range list(k, "configMapGenerator") {
		for _, f := range list(g, "files") {
			refs = append(refs, f.(string))
		}
	}
	for _, r := range refs {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("%s names %s: %v", path, r, err)
		}
	}
}

// node is the node agent's DaemonSet as shipped.
func node(t *testing.T) obj {
	t.Helper()
	docs := readDocs(t, "kubernetes/node")["kubernetes/node/daemonset.yaml"]
	if len(docs) != 1 || str(docs[0], "kind") != "DaemonSet" {
		t.Fatalf("kubernetes/node/daemonset.yaml: want one DaemonSet, got %d documents", len(docs))
	}
	return docs[0]
}

func container(t *testing.T, pod any, name string) obj {
	t.Helper()
	for _, c := range list(pod, "containers") {
		if str(c, "name") == name {
			return c.(obj)
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// renderedConfig fills a config template as start.sh does, with the
// token block and extra config the deployment adds.
func renderedConfig(t *testing.T, name, extra string) *daemon.Config {
	t.Helper()
	b, err := os.ReadFile("kubernetes/config/" + name)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.NewReplacer("@LISTEN_HOST@", "0.0.0.0", "@PORT@", "8443", "@NODE_NAME@", "node-a",
		"@ADVERTISE_URL@", "https://kernpool-node-x.kernpool-node.kernpool.svc.cluster.local:8443",
		"@FLEET_REDIS@", "redis://kernpool-redis:6379/0", "@CHECKPOINT_STORE@", "s3://kernpool-checkpoints/prod").Replace(string(b))
	if left := regexp.MustCompile(`@[A-Z_]+@`).FindString(src); left != "" {
		t.Fatalf("%s: %s is not filled by start.sh", name, left)
	}
	src += "token \"gateway\" {\n  sha256 = \"" + strings.Repeat("ab", 32) + "\"\n  admin = true\n}\n" + extra
	cfg, err := daemon.ParseConfig([]byte(src), name)
	if err != nil {
		t.Fatalf("the rendered %s does not load: %v", name, err)
	}
	return cfg
}

// TestNodeAgentDrainsWithinItsGrace: the node agent drains on SIGTERM
// and the kubelet waits long enough for the drain's worst case before
// SIGKILL (which would lose the unsaved kernels' work).
func TestNodeAgentDrainsWithinItsGrace(t *testing.T) {
	cfg := renderedConfig(t, "node.hcl.in", "")
	if !cfg.DrainOnTerm {
		t.Fatal("node.hcl.in: drain_on_term is off: SIGTERM would drop the node's kernels unsaved")
	}
	if !cfg.Profiles["default"].Persist {
		t.Fatal("node.hcl.in: the default profile does not persist: a drain would save nothing")
	}
	need := cfg.DrainGrace + cfg.Profiles["default"].InterruptGrace + cfg.Checkpoints.Timeout
	spec := get(node(t), "spec", "template", "spec")
	grace, _ := get(spec, "terminationGracePeriodSeconds").(int)
	if time.Duration(grace)*time.Second < need {
		t.Fatalf("terminationGracePeriodSeconds %d < drain_grace + interrupt_grace + checkpoint_timeout = %v", grace, need)
	}
}

// TestNodeAgentPod: the fields the design relies on.
func TestNodeAgentPod(t *testing.T) {
	spec := get(node(t), "spec", "template", "spec")
	kp := container(t, spec, "kernpool")
	ports := map[string]bool{}
	for _, p := range list(kp, "ports") {
		ports[str(p, "name")] = true
	}
	probe := get(kp, "readinessProbe", "httpGet")
	if str(probe, "path") != "/v1/ready" || str(probe, "scheme") != "HTTPS" || !ports[str(probe, "port")] {
		t.Errorf("readiness probe %v: want GET /v1/ready over HTTPS on a declared port", probe)
	}
	if get(kp, "livenessProbe", "httpGet") != nil {
		t.Error("liveness on /v1/ready would kill a draining agent (it answers 503 while it saves)")
	}
	sc := get(kp, "securityContext")
	if get(sc, "privileged") != true {
		t.Error("the agent is not privileged: kernels' cgroups need a writable cgroupfs")
	}
	if drop := list(sc, "capabilities", "drop"); len(drop) != 1 || drop[0] != "SYS_RESOURCE" {
		t.Errorf("capabilities.drop %v: want exactly SYS_RESOURCE (absent from some hosts' bounding set)", drop)
	}
	if get(spec, "hostPID") == true {
		t.Error("hostPID: the agent needs no other pid namespace than its own")
	}
	volumes := map[string]bool{}
	for _, v := range list(spec, "volumes") {
		volumes[str(v, "name")] = true
	}
	for _, c := range list(spec, "containers") {
		if img := str(c, "image"); strings.HasPrefix(img, "localhost/") && str(c, "imagePullPolicy") != "Never" {
			t.Errorf("container %s: image %s is built locally (deploy/image/build): imagePullPolicy must be Never", str(c, "name"), img)
		}
		for _, m := range list(c, "volumeMounts") {
			if !volumes[str(m, "name")] {
				t.Errorf("container %s mounts undeclared volume %s", str(c, "name"), str(m, "name"))
			}
		}
	}
	if cmd := list(kp, "command"); len(cmd) < 3 || cmd[0] != "/usr/bin/tini" {
		t.Errorf("command %v: tini forwards SIGTERM to the daemon and reaps", cmd)
	}
}

// TestDaemonServesProbePath: the probe's path is one the API serves
// without credentials (a kubelet probe carries none).
func TestDaemonServesProbePath(t *testing.T) {
	b, err := os.ReadFile("../pool/api/auth.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`var open = map[string]bool{"/v1/ready": true}`)) {
		t.Fatal("pool/api no longer serves /v1/ready without credentials: the manifests' probes need it")
	}
}

// TestRouterConfigLoads: the router's rendered config loads.
func TestRouterConfigLoads(t *testing.T) {
	cfg := renderedConfig(t, "router.hcl.in", "")
	if cfg.Fleet.Redis == "" || cfg.Fleet.NodeCA == "" || cfg.Fleet.KubernetesService != "kernpool-node" {
		t.Fatalf("router config: fleet_redis %q, fleet_node_ca %q, fleet_kubernetes_service %q (want the node Service, kernpool-node)",
			cfg.Fleet.Redis, cfg.Fleet.NodeCA, cfg.Fleet.KubernetesService)
	}
}

// TestStartScriptFillsEveryPlaceholder: start.sh substitutes every @X@
// the templates use.
func TestStartScriptFillsEveryPlaceholder(t *testing.T) {
	sh, err := os.ReadFile("kubernetes/config/start.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node.hcl.in", "router.hcl.in"} {
		b, err := os.ReadFile("kubernetes/config/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, ph := range regexp.MustCompile(`@[A-Z_]+@`).FindAllString(string(b), -1) {
			if !bytes.Contains(sh, []byte(`"s|`+ph+`|`)) {
				t.Errorf("%s uses %s, which start.sh does not fill", name, ph)
			}
		}
	}
}

// TestKustomizeBuilds: kubectl's kustomize renders both kustomizations
// (client side, no cluster) into the expected objects.
func TestKustomizeBuilds(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH: the kustomizations are checked by file above only")
	}
	want := map[string][]string{
		"kubernetes":                 {"ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment", "Namespace", "Role", "RoleBinding", "Service", "ServiceAccount", "StatefulSet"},
		"../integration/k8s/overlay": {"ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"},
	}
	for _, dir := range kustomizations {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
			}
			kinds := map[string]bool{}
			for _, m := range regexp.MustCompile(`(?m)^kind: (\w+)$`).FindAllSubmatch(out, -1) {
				kinds[string(m[1])] = true
			}
			var got []string
			for k := range kinds {
				got = append(got, k)
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(want[dir], " ") {
				t.Errorf("kubectl kustomize %s: kinds %v, want %v", dir, got, want[dir])
			}
		})
	}
}

// Package charts_test tests the Helm chart charts/kube-nats-relay: helm lint and helm template
// with helm v3.22.0 (built by `make tools`), the rendered objects against the real test
// apiserver, and the relay running with the chart's ServiceAccount and RBAC.
package charts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "kube-nats-relay"

var (
	env      *testenv.Env
	relayBin string
)

func TestMain(m *testing.M) {
	relaytest.Main(m, testenv.Options{Kube: true, NATS: true}, &env, &relayBin)
}

// tool returns the path of a binary `make tools` built (helm, kubectl).
func tool(t *testing.T, name string) string {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not built (run `make tools`): %v", name, err)
	}
	return p
}

// run runs a command and returns its stdout; stderr is returned in the error.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	// helm keeps caches and configuration under HOME; nothing of the developer's is used.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// helmArgs turns values files (under testdata) and --set pairs into helm flags.
func helmArgs(files []string, sets []string) []string {
	var args []string
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join("testdata", f)
		}
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// renderRaw runs helm template for release "relay" in namespace ns.
func renderRaw(t *testing.T, ns string, files, sets []string) (string, error) {
	t.Helper()
	args := append([]string{"template", "relay", chartDir, "--namespace", ns, "--kube-version", kubeVersion(t)}, helmArgs(files, sets)...)
	// As if the cluster served the Prometheus Operator's APIs, as the test bed's does once
	// ensureServiceMonitorCRD ran (see monitoring_test.go for the render without them).
	args = append(args, monitoringAPIVersions...)
	return run(t, tool(t, "helm"), args...)
}

// rendered holds the objects of one helm template run, decoded by kind.
type rendered struct {
	yaml string
	objs []object
}

// object is one rendered manifest.
type object struct {
	Kind      string
	Name      string
	Namespace string
	JSON      []byte
}

// render runs helm template and decodes the manifests; it fails the test if helm fails.
func render(t *testing.T, ns string, files, sets []string) *rendered {
	t.Helper()
	out, err := renderRaw(t, ns, files, sets)
	if err != nil {
		t.Fatal(err)
	}
	return decodeRendered(t, out)
}

// decodeRendered decodes the manifests helm rendered.
func decodeRendered(t *testing.T, out string) *rendered {
	t.Helper()
	r := &rendered{yaml: out}
	for _, doc := range strings.Split(out, "\n---") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered manifest is not YAML: %v\n%s", err, doc)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(j, &meta); err != nil {
			t.Fatalf("decode manifest: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue // a comment-only document
		}
		r.objs = append(r.objs, object{Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, JSON: j})
	}
	return r
}

// all returns the objects of a kind.
func (r *rendered) all(kind string) []object {
	var out []object
	for _, o := range r.objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// decode decodes the only object of kind into v; it fails if there is not exactly one.
func (r *rendered) decode(t *testing.T, kind string, v any) {
	t.Helper()
	objs := r.all(kind)
	if len(objs) != 1 {
		t.Fatalf("rendered %d %s objects, want 1", len(objs), kind)
	}
	if err := json.Unmarshal(objs[0].JSON, v); err != nil {
		t.Fatalf("decode %s: %v", kind, err)
	}
}

func (r *rendered) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	r.decode(t, "Deployment", &d)
	return &d
}

func (r *rendered) pdb(t *testing.T) *policyv1.PodDisruptionBudget {
	t.Helper()
	var p policyv1.PodDisruptionBudget
	r.decode(t, "PodDisruptionBudget", &p)
	return &p
}

func (r *rendered) service(t *testing.T) *corev1.Service {
	t.Helper()
	var s corev1.Service
	r.decode(t, "Service", &s)
	return &s
}

// roles returns the Roles by "namespace/name".
func (r *rendered) roles(t *testing.T) map[string]rbacv1.Role {
	t.Helper()
	out := map[string]rbacv1.Role{}
	for _, o := range r.all("Role") {
		var role rbacv1.Role
		if err := json.Unmarshal(o.JSON, &role); err != nil {
			t.Fatal(err)
		}
		out[role.Namespace+"/"+role.Name] = role
	}
	return out
}

// clusterRoles returns the ClusterRoles by name.
func (r *rendered) clusterRoles(t *testing.T) map[string]rbacv1.ClusterRole {
	t.Helper()
	out := map[string]rbacv1.ClusterRole{}
	for _, o := range r.all("ClusterRole") {
		var role rbacv1.ClusterRole
		if err := json.Unmarshal(o.JSON, &role); err != nil {
			t.Fatal(err)
		}
		out[role.Name] = role
	}
	return out
}

// envOf returns the relay container's environment by name.
func envOf(t *testing.T, d *appsv1.Deployment) map[string]corev1.EnvVar {
	t.Helper()
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	out := map[string]corev1.EnvVar{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if _, dup := out[e.Name]; dup {
			t.Errorf("env %s appears twice", e.Name)
		}
		out[e.Name] = e
	}
	return out
}

package charts_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// kubectl runs the kubectl of `make tools` as the test apiserver's admin and returns its
// stdout and stderr (warnings go there).
func kubectl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(tool(t, "kubectl"), append([]string{"--kubeconfig", env.Kube.KubeconfigPath()}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

func kubeClient(t *testing.T) *kubernetes.Clientset { return relaytest.Kube(t, env) }

// ensureNamespace creates a namespace (if missing) that enforces the restricted Pod Security
// Standard, so that the apiserver checks the chart's pod template against it.
func ensureNamespace(t *testing.T, cs *kubernetes.Clientset, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The default ServiceAccount, which kube-controller-manager (not running here) creates in
	// every namespace: pods that name none, as the helm test pod, need it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// applyManifests applies YAML server-side (dryRun: validated and admitted, not stored) and
// fails on an error or a warning (a Pod Security violation is a warning on a Deployment).
func applyManifests(t *testing.T, manifests string, dryRun bool) string {
	t.Helper()
	out, warnings := applyWarnings(t, manifests, dryRun)
	if warnings != "" {
		t.Errorf("kubectl apply warned:\n%s", warnings)
	}
	return out
}

// applyWarnings applies like applyManifests and returns kubectl's output and warnings.
func applyWarnings(t *testing.T, manifests string, dryRun bool) (out, warnings string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(path, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", "--server-side", "--field-manager=chart-test", "-f", path}
	if dryRun {
		args = append(args, "--dry-run=server")
	}
	out, stderr, err := kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out, strings.TrimSpace(stderr)
}

// ensureServiceMonitorCRD installs the stand-in ServiceMonitor CRD and waits until it serves.
func ensureServiceMonitorCRD(t *testing.T) {
	t.Helper()
	applyManifests(t, string(mustRead(t, "testdata/servicemonitor-crd.yaml")), false)
	if out, stderr, err := kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com"); err != nil {
		t.Fatalf("ServiceMonitor CRD not established: %v\n%s%s", err, out, stderr)
	}
}

// TestHelmInstall installs the chart for real with helm (two replicas, rules, ServiceMonitor)
// and checks the release's notes, then uninstalls it.
func TestHelmInstall(t *testing.T) {
	cs := kubeClient(t)
	ensureServiceMonitorCRD(t)
	ensureNamespace(t, cs, "team-a")
	ensureNamespace(t, cs, "team-c")
	ns := relaytest.Name(t)
	ensureNamespace(t, cs, ns)
	helm := tool(t, "helm")
	kc := env.Kube.KubeconfigPath()
	args := append([]string{"install", "relay", chartDir, "--kubeconfig", kc, "--namespace", ns},
		helmArgs([]string{"rules.yaml", "servicemonitor.yaml"}, []string{"replicaCount=2"})...)
	out, err := run(t, helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := run(t, helm, "uninstall", "relay", "--kubeconfig", kc, "--namespace", ns, "--wait"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	for _, want := range []string{"STATUS: deployed", "NOTES:", "Leader election is on (2 replicas)", "Lease\n" + ns + "/" + fullname, "ServiceMonitor " + fullname} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install output lacks %q:\n%s", want, out)
		}
	}
	if _, err := cs.RbacV1().Roles(ns).Get(context.Background(), fullname+"-leader-election", metav1.GetOptions{}); err != nil {
		t.Errorf("leader election Role after helm install: %v", err)
	}
}

// TestPodSecurityViolationIsNoticed shows that the apply tests would notice a pod template
// outside the restricted Pod Security Standard.
func TestPodSecurityViolationIsNoticed(t *testing.T) {
	ns := relaytest.Name(t)
	ensureNamespace(t, kubeClient(t), ns)
	// Without the helm test pod, which shares the securityContext: a Pod is refused outright,
	// where a Deployment only draws the warning.
	r := render(t, ns, nil, []string{"securityContext.allowPrivilegeEscalation=true", "tests.enabled=false"})
	if _, warnings := applyWarnings(t, r.yaml, true); !strings.Contains(warnings, "allowPrivilegeEscalation") {
		t.Errorf("no Pod Security warning for allowPrivilegeEscalation=true; kubectl warned: %q", warnings)
	}
}

// TestRenderedObjectsApply sends every variant's objects to the real apiserver with a
// server-side dry run (schema, defaulting, admission including Pod Security "restricted"),
// and creates the default variant for real. The ServiceMonitor goes to a minimal stand-in
// CRD (testdata/servicemonitor-crd.yaml): the apiserver routes it, the Prometheus Operator's
// own schema is not checked.
func TestRenderedObjectsApply(t *testing.T) {
	cs := kubeClient(t)
	for _, ns := range []string{"team-a", "team-b", "team-c", "leases"} {
		ensureNamespace(t, cs, ns)
	}
	ensureServiceMonitorCRD(t)

	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
		real  bool
	}{
		{"defaults", nil, nil, true},
		{"replicas", nil, []string{"replicaCount=2", "leaderElection.namespace=leases"}, false},
		{"namespaces", []string{"namespaces.yaml"}, nil, false},
		{"rules", []string{"rules.yaml"}, nil, false},
		{"servicemonitor", []string{"servicemonitor.yaml"}, nil, false},
		{"nats secret", []string{"nats-secret.yaml"}, nil, false},
		{"embedded", []string{"embedded.yaml"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := relaytest.Name(t)
			ensureNamespace(t, cs, ns)
			r := render(t, ns, tc.files, tc.sets)
			out := applyManifests(t, r.yaml, !tc.real)
			for _, o := range r.objs {
				if !strings.Contains(strings.ToLower(out), strings.ToLower(o.Kind)+"/"+o.Name) &&
					!strings.Contains(strings.ToLower(out), "/"+o.Name+" serverside-applied") {
					t.Errorf("kubectl did not apply %s %s:\n%s", o.Kind, o.Name, out)
				}
			}
			if !tc.real {
				return
			}
			d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), fullname, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get the created Deployment: %v", err)
			}
			if got := d.Spec.Template.Spec.ServiceAccountName; got != fullname {
				t.Errorf("stored Deployment runs as %q, want %q", got, fullname)
			}
		})
	}
}

package charts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// helmCluster runs helm with the given arguments against the test apiserver as its admin.
func helmCluster(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, tool(t, "helm"), append(args, "--kubeconfig", env.Kube.KubeconfigPath())...)
}

// renderServer renders the chart as `helm install` does, with Helm's lookups answered by the
// test apiserver (helm template --dry-run=server), for release "relay" in namespace ns.
func renderServer(t *testing.T, ns string, sets []string) (*rendered, error) {
	t.Helper()
	out, err := helmCluster(t, append([]string{"template", "relay", chartDir, "--namespace", ns, "--dry-run=server"}, helmArgs(nil, sets)...)...)
	if err != nil {
		return nil, err
	}
	return decodeRendered(t, out), nil
}

// TestHelmRefusesNamespacesThatDoNotExist installs the chart for real and upgrades it to a
// namespace list that names an existing namespace and one that does not exist: the upgrade
// fails before anything is applied, naming the missing namespace, so no Role is left in the
// existing one and the release stays at its first revision. A first install that names a
// missing namespace fails the same way. Under plain `helm template` (no cluster) nothing can
// be checked and the chart renders.
func TestHelmRefusesNamespacesThatDoNotExist(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	ns := relaytest.Name(t)
	other, missing := ns+"-other", ns+"-missing"
	ensureNamespace(t, cs, ns)
	ensureNamespace(t, cs, other)
	sets := func(namespaces ...string) []string {
		return []string{"relay.resources={configmaps}", "relay.namespaces={" + strings.Join(namespaces, ",") + "}"}
	}
	install := append([]string{"install", "relay", chartDir, "--namespace", ns}, helmArgs(nil, sets(ns, missing))...)
	if out, err := helmCluster(t, install...); err == nil || !strings.Contains(err.Error(), "namespaces "+missing+" do not exist") {
		t.Fatalf("helm install with namespace %s that does not exist: %v, want an error naming it\n%s", missing, err, out)
	}
	if _, err := cs.RbacV1().Roles(ns).Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Role in %s after the refused install: %v, want none", ns, err)
	}

	if out, err := helmCluster(t, append([]string{"install", "relay", chartDir, "--namespace", ns}, helmArgs(nil, sets(ns))...)...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := helmCluster(t, "uninstall", "relay", "--namespace", ns, "--wait"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	upgrade := append([]string{"upgrade", "relay", chartDir, "--namespace", ns}, helmArgs(nil, sets(ns, other, missing))...)
	if out, err := helmCluster(t, upgrade...); err == nil || !strings.Contains(err.Error(), "namespaces "+missing+" do not exist") {
		t.Fatalf("helm upgrade with namespace %s that does not exist: %v, want an error naming it\n%s", missing, err, out)
	}
	if _, err := cs.RbacV1().Roles(other).Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Role in %s after the refused upgrade: %v, want none (nothing applied)", other, err)
	}
	out, err := helmCluster(t, "history", "relay", "--namespace", ns, "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, `"revision":`); n != 1 || !strings.Contains(out, `"status":"deployed"`) {
		t.Errorf("helm history after the refused upgrade: %s; want revision 1 deployed only", out)
	}

	// Without a cluster the chart cannot know.
	render(t, ns, nil, sets(ns, missing))
}

// TestHelmGrantsClusterScopedCRDsThroughTheClusterRole installs a cluster-scoped CRD and
// renders the chart as helm install does with that CRD's resource and a namespace list:
// the chart looks the CRD's scope up and grants it through the ClusterRole (a Role could not
// grant it: the relay would be refused), also when the CRD is named by its singular or short
// name. Under plain `helm template` the CRD cannot be looked
// up and it gets Roles unless listed in rbac.clusterScopedResources, as documented.
func TestHelmGrantsClusterScopedCRDsThroughTheClusterRole(t *testing.T) {
	cs := kubeClient(t)
	ns := relaytest.Name(t)
	ensureNamespace(t, cs, ns)
	const group = "lookup.example.com"
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.%[1]s
spec:
  group: %[1]s
  scope: Cluster
  names: {plural: gizmos, singular: gizmo, shortNames: [gz], kind: Gizmo, listKind: GizmoList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group)
	applyManifests(t, crd, false)
	t.Cleanup(func() { _, _, _ = kubectl(t, "delete", "crd", "gizmos."+group, "--ignore-not-found") })

	// The release in releaseNS (the ClusterRole's name in checkRBAC), the Role in ns. The
	// CRD's singular and short name are granted as its plural, as the relay resolves them.
	for _, name := range []string{"gizmos", "gizmo", "gz"} {
		r, err := renderServer(t, releaseNS, []string{"relay.resources={configmaps," + name + "." + group + "}", "relay.namespaces={" + ns + "}"})
		if err != nil {
			t.Fatal(err)
		}
		checkRBAC(t, r, rbacWant{
			cluster:    listWatch(group + "/gizmos"),
			namespaced: map[string][]string{ns: listWatch("/configmaps")},
		})
	}

	// helm template: no cluster to ask.
	sets := []string{"relay.resources={configmaps,gizmos." + group + "}", "relay.namespaces={" + ns + "}"}
	checkRBAC(t, render(t, releaseNS, nil, sets), rbacWant{
		namespaced: map[string][]string{ns: listWatch("/configmaps", group+"/gizmos")},
	})
}

// TestHelmRefusesMissingNamespacesInANewReleaseNamespace renders as `helm install
// --create-namespace` does into a namespace that does not exist yet, with a namespace list
// naming only namespaces that do not exist either: the chart still finds the cluster (its
// default namespace) and refuses them before anything is applied.
func TestHelmRefusesMissingNamespacesInANewReleaseNamespace(t *testing.T) {
	ns := relaytest.Name(t)
	missing := ns + "-missing"
	_, err := renderServer(t, ns, []string{"relay.resources={configmaps}", "relay.namespaces={" + missing + "}"})
	if err == nil || !strings.Contains(err.Error(), "namespaces "+missing+" do not exist") {
		t.Fatalf("render into new namespace %s with namespace %s that does not exist: %v, want an error naming it", ns, missing, err)
	}
}

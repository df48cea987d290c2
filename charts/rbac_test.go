package charts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// eventTimeout bounds the wait for one event or log line on a busy machine.
const eventTimeout = 2 * time.Minute

// TestRelayWithTheChartsServiceAccount creates the chart's ServiceAccount and RBAC for real,
// runs the relay with a token of that ServiceAccount, and configures it with one resource
// more than the chart was given: the configured ones (a namespaced resource through a Role,
// a cluster-scoped one through the ClusterRole) are relayed, the extra one is refused, named
// in /readyz and in an error log, and does not stop the others.
func TestRelayWithTheChartsServiceAccount(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	name := relaytest.Name(t)
	watched := name + "-watched"
	ensureNamespace(t, cs, name)
	ensureNamespace(t, cs, watched)

	r := render(t, name, nil, []string{"relay.resources={configmaps,namespaces}", "relay.namespaces={" + watched + "}"})
	// ServiceAccount, ClusterRole and binding, Role and binding, those of the Lease.
	kubeconfig := chartIdentity(t, r, name, 7)
	// The chart's own environment, with the test bed's kubeconfig, NATS and names, and secrets
	// added to the resources: the chart grants nothing on them.
	vars := chartVars(t, r, name, kubeconfig)
	vars["RELAY_RESOURCES"] += ",secrets"
	if vars["RELAY_NAMESPACES"] != watched {
		t.Fatalf("the chart set RELAY_NAMESPACES=%q, want %q", vars["RELAY_NAMESPACES"], watched)
	}
	p := relaytest.Start(t, relayBin, vars)

	// The refused resource: an error log and /readyz naming it.
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(waitLine(t, p, "serving /healthz"))
	if addr == nil {
		t.Fatalf("no address in the relay's health server line:\n%s", p.Output())
	}
	waitLine(t, p, `"message":"relay started"`, `"version":"dev`) // the unstamped build's version
	if line := waitLine(t, p, "resource failing", "secrets"); !strings.Contains(line, `"level":"error"`) {
		t.Errorf("the refused resource is reported as %s, want an error", line)
	}
	var readyz string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		code, body, err := get(ctx, "http://"+addr[1]+"/readyz")
		if err != nil {
			return false, nil
		}
		readyz = fmt.Sprintf("%d %s", code, body)
		// Ready apart from secrets: the others have synced, secrets is forbidden.
		lines := strings.Split(strings.TrimSpace(body), "\n")
		if strings.HasPrefix(lines[0], "leader ") {
			lines = lines[1:] // the chart turns leader election on
		}
		return code == http.StatusServiceUnavailable && len(lines) == 2 &&
			strings.Contains(lines[1], "secrets") && strings.Contains(lines[1], "forbidden"), nil
	})
	if err != nil {
		t.Fatalf("/readyz never reported only secrets as forbidden; last: %s\n%s", readyz, p.Output())
	}

	// The configured resources flow: a ConfigMap in the watched namespace (Role) and a new
	// namespace (ClusterRole).
	if _, err := cs.CoreV1().ConfigMaps(watched).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flowing"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, cs, name+"-new")
	js := relaytest.JetStream(t, env)
	prefix := "kube." + vars["RELAY_CLUSTER"]
	waitSubject(t, js, vars["RELAY_STREAM"], prefix+".core.v1.configmaps."+watched+".flowing.added")
	waitSubject(t, js, vars["RELAY_STREAM"], prefix+".core.v1.namespaces._."+name+"-new.added")
	if s, err := js.Stream(ctx, vars["RELAY_STREAM"]); err == nil {
		if _, err := s.GetLastMsgForSubject(ctx, prefix+".core.v1.secrets.>"); err == nil {
			t.Errorf("a secrets event was published despite the missing grant")
		}
	}
	p.Stop(t)
}

// chartIdentity creates the ServiceAccount and RBAC objects the chart rendered in r (want of
// them), for real, and returns a kubeconfig with a token of that ServiceAccount.
func chartIdentity(t *testing.T, r *rendered, name string, want int) string {
	t.Helper()
	ctx := context.Background()
	cs := kubeClient(t)
	var rbacOnly []string
	for _, o := range r.objs {
		switch o.Kind {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			rbacOnly = append(rbacOnly, string(o.JSON))
		}
	}
	if len(rbacOnly) != want {
		t.Fatalf("rendered %d ServiceAccount and RBAC objects, want %d", len(rbacOnly), want)
	}
	// JSON is YAML: one document each.
	applyManifests(t, strings.Join(rbacOnly, "\n---\n"), false)
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, name+"-"+fullname, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, name+"-"+fullname, metav1.DeleteOptions{})
	})
	saCfg, err := env.Kube.ServiceAccountConfig(ctx, name, fullname)
	if err != nil {
		t.Fatal(err)
	}
	return relaytest.WriteKubeconfig(t, saCfg)
}

// chartVars is the chart's own environment for the relay, with the test bed's kubeconfig,
// NATS and names. Values the downward API fills in (the pod's namespace and name) are set as
// the pod would see them.
func chartVars(t *testing.T, r *rendered, name, kubeconfig string) map[string]string {
	t.Helper()
	vars := relaytest.Vars(env, name)
	for n, e := range envOf(t, r.deployment(t)) {
		if e.Value != "" && n != "NATS_URL" && n != "RELAY_HTTP_ADDR" {
			vars[n] = e.Value
		}
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				vars[n] = name
			case "metadata.name":
				vars[n] = name + "-pod"
			}
		}
	}
	vars["KUBECONFIG"] = kubeconfig
	return vars
}

// TestLeaderElectionWithTheChartsRBAC runs the relay as the chart does with two replicas:
// leader election on, the Lease in the release namespace, and only the chart's grants. The
// relay must take the Lease and relay.
func TestLeaderElectionWithTheChartsRBAC(t *testing.T) {
	cs := kubeClient(t)
	name := relaytest.Name(t)
	ensureNamespace(t, cs, name)
	r := render(t, name, nil, []string{"replicaCount=2", "relay.resources={configmaps}", "relay.namespaces={" + name + "}"})
	// ServiceAccount, the Role and RoleBinding of configmaps, those of the Lease.
	kubeconfig := chartIdentity(t, r, name, 5)
	vars := chartVars(t, r, name, kubeconfig)
	if vars["RELAY_LEADER_ELECT"] != "true" || vars["RELAY_LEADER_ELECTION_NAMESPACE"] != name {
		t.Fatalf("chart environment: RELAY_LEADER_ELECT=%q RELAY_LEADER_ELECTION_NAMESPACE=%q, want true and %s",
			vars["RELAY_LEADER_ELECT"], vars["RELAY_LEADER_ELECTION_NAMESPACE"], name)
	}
	p := relaytest.Start(t, relayBin, vars)
	waitLine(t, p, `"message":"became leader"`)
	waitLine(t, p, `"message":"watching"`)
	lease, err := cs.CoordinationV1().Leases(name).Get(context.Background(), vars["RELAY_LEADER_ELECTION_LEASE"], metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's Lease: %v", err)
	}
	// The chart leaves the identity to the relay: the host name (a pod's name) and a random
	// suffix, which the leader election's safety relies on (docs/operations.md).
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(host) + `_[0-9a-f]{8}$`).MatchString(holder) {
		t.Errorf("lease holder %q, want %s_ and a random suffix", holder, host)
	}
	if strings.Contains(p.Output(), "forbidden") {
		t.Errorf("the relay was refused something:\n%s", p.Output())
	}
	p.Stop(t)
}

// waitLine waits until a line of the relay's output contains every one of want, and
// returns that line.
func waitLine(t *testing.T, p *relaytest.Process, want ...string) string {
	t.Helper()
	var found string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, eventTimeout, true, func(context.Context) (bool, error) {
		for _, line := range strings.Split(p.Output(), "\n") {
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line, w) }) {
				found = line
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no relay output line contains all of %q:\n%s", want, p.Output())
	}
	return found
}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitSubject waits until the stream holds a message on subject.
func waitSubject(t *testing.T, js jetstream.JetStream, stream, subject string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			last = err
			return false, nil
		}
		_, err = s.GetLastMsgForSubject(ctx, subject)
		last = err
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no event on %s in stream %s: %v (last: %v)", subject, stream, err, last)
	}
}

// TestBuiltinClusterScopedResources compares the chart's built-in list of cluster-scoped
// resources with the test apiserver's discovery: every cluster-scoped resource it serves that
// can be listed and watched must be granted through the ClusterRole even when namespaces are
// listed, and every namespaced one through the Roles.
func TestBuiltinClusterScopedResources(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var resources, cluster, namespaced []string
	seen := map[string]bool{}
	for _, l := range lists {
		parsed, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		gv := parsed.Group
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			key := gv + "/" + r.Name
			if seen[key] || strings.HasSuffix(gv, "monitoring.coreos.com") || strings.HasSuffix(gv, ".example.com") {
				continue // another version, or a CRD of another test
			}
			seen[key] = true
			spec := r.Name
			if gv != "" {
				spec += "." + gv
			}
			resources = append(resources, spec)
			if r.Namespaced {
				namespaced = append(namespaced, key)
			} else {
				cluster = append(cluster, key)
			}
		}
	}
	values := map[string]any{"relay": map[string]any{"resources": resources, "namespaces": []string{"team-a"}}}
	path := filepath.Join(t.TempDir(), "values.json")
	b, _ := json.Marshal(values)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := render(t, releaseNS, []string{path}, nil)
	if len(resources) < 40 {
		t.Fatalf("discovery found %d resources, want the built-in ones", len(resources))
	}
	t.Logf("%d listable resources: %d cluster-scoped, %d namespaced", len(resources), len(cluster), len(namespaced))
	checkRBAC(t, r, rbacWant{cluster: listWatch(cluster...), namespaced: map[string][]string{"team-a": listWatch(namespaced...)}})
}

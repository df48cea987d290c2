package charts_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// TestTemplateShortNamesAndSingularsGrantTheResourceItself renders resources written as
// kubectl accepts them, short names and singulars with and without their group, in
// relay.resources, in rules and in rbac.clusterScopedResources: the RBAC names each resource
// in its own group, as the relay resolves it, never "cm" in the core group.
func TestTemplateShortNamesAndSingularsGrantTheResourceItself(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want rbacWant
	}{
		{"all namespaces", []string{"relay.resources={cm,deploy,hpa,event,no,crd,widgets.example.com}"},
			rbacWant{cluster: listWatch("/configmaps", "/events", "/nodes", "apps/deployments",
				"autoscaling/horizontalpodautoscalers", "apiextensions.k8s.io/customresourcedefinitions", "example.com/widgets")}},
		{"listed namespaces", []string{"relay.resources={configmap,sts,no,pv,deployment.v1.apps}", "relay.namespaces={team-a}"},
			rbacWant{cluster: listWatch("/nodes", "/persistentvolumes"), namespaced: map[string][]string{"team-a": listWatch("/configmaps", "apps/statefulsets", "apps/deployments")}}},
		{"a singular with its group", []string{"relay.resources={deployment.apps}"}, rbacWant{cluster: listWatch("apps/deployments")}},
		{"rules", []string{"relay.resources={po}", "relay.namespaces={team-a}", "rules.resources[0].resource=deploy", "rules.resources[0].namespaces={team-b}",
			"rules.resources[1].resource=ingress", "rules.resources[2].resource=rs.apps"},
			rbacWant{namespaced: map[string][]string{
				"team-a": listWatch("/pods", "networking.k8s.io/ingresses", "apps/replicasets"),
				"team-b": listWatch("apps/deployments"),
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRBAC(t, render(t, releaseNS, nil, tc.sets), tc.want)
		})
	}
}

// TestTemplateRefusesWhatTheRBACCannotFollow renders values whose RBAC the chart cannot
// derive: a name without a group that is neither a core resource nor a known short name or
// singular (the install would succeed and the relay be refused everything), and variables
// the RBAC is derived from set through env or extraEnv instead of their structured values.
func TestTemplateRefusesWhatTheRBACCannotFollow(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want []string
	}{
		{"unknown name in relay.resources", []string{"relay.resources={cm,widgets}"}, []string{`relay.resources: "widgets"`, "with its group"}},
		{"unknown name in rules", []string{"rules.resources[0].resource=gizmo"}, []string{`rules.resources: "gizmo"`}},
		{"short name of two resources", []string{"relay.resources={ev}"}, []string{`relay.resources: "ev"`, "events, events.events.k8s.io"}},
		{"two names of one resource", []string{"relay.resources={configmaps,cm}"}, []string{`"configmaps" and "cm"`, "/configmaps"}},
		{"two names of one resource in rules", []string{"relay.resources={deployments.apps}", "rules.resources[0].resource=deploy"}, []string{`"deployments.apps" and "deploy"`}},
		{"unknown name in mirrorResources", []string{"relay.mirrorResources={cms}"}, []string{`relay.mirrorResources (RELAY_MIRROR_RESOURCES) "cms": not relayed`}},
		{"unknown name in clusterScopedResources", []string{"rbac.clusterScopedResources={gadgets}"}, []string{`rbac.clusterScopedResources: "gadgets"`}},
		{"env RELAY_RESOURCES", []string{"env.RELAY_RESOURCES=secrets"}, []string{"RELAY_RESOURCES", "relay.resources"}},
		{"env RELAY_NAMESPACES", []string{"env.RELAY_NAMESPACES=team-a"}, []string{"RELAY_NAMESPACES", "relay.namespaces"}},
		{"env RELAY_NAMESPACE_SELECTOR", []string{"env.RELAY_NAMESPACE_SELECTOR=a=b"}, []string{"RELAY_NAMESPACE_SELECTOR", "relay.namespaceSelector"}},
		{"env RELAY_RULES_FILE", []string{"env.RELAY_RULES_FILE=/r.yaml"}, []string{"RELAY_RULES_FILE", "rules"}},
		{"env RELAY_LEADER_ELECT", []string{"env.RELAY_LEADER_ELECT=false"}, []string{"RELAY_LEADER_ELECT", "leaderElection.enabled"}},
		{"env RELAY_LEADER_ELECTION_LEASE", []string{"env.RELAY_LEADER_ELECTION_LEASE=x"}, []string{"RELAY_LEADER_ELECTION_LEASE", "leaderElection.leaseName"}},
		{"extraEnv RELAY_LEADER_ELECTION_NAMESPACE", []string{"extraEnv[0].name=RELAY_LEADER_ELECTION_NAMESPACE", "extraEnv[0].value=x"},
			[]string{"RELAY_LEADER_ELECTION_NAMESPACE", "leaderElection.namespace"}},
		{"extraEnv KUBECONFIG", []string{"extraEnv[0].name=KUBECONFIG", "extraEnv[0].value=/k"}, []string{"KUBECONFIG", "kubeconfig.existingSecret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderRaw(t, releaseNS, nil, tc.sets)
			if err == nil {
				t.Fatalf("helm template succeeded, want an error mentioning %q:\n%s", tc.want, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want one mentioning %q", err, w)
				}
			}
		})
	}
}

// TestTemplateKubeconfigModeCreatesNoLocalRBAC renders the relay watching another cluster
// through a kubeconfig: it lists, watches and holds its Lease there, so the chart grants
// nothing in the cluster it runs in.
func TestTemplateKubeconfigModeCreatesNoLocalRBAC(t *testing.T) {
	r := render(t, releaseNS, nil, []string{"kubeconfig.existingSecret=remote", "relay.namespaces={team-a}"})
	for _, kind := range []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		if objs := r.all(kind); len(objs) != 0 {
			t.Errorf("rendered %d %s objects with a kubeconfig, want none", len(objs), kind)
		}
	}
	checkEnv(t, r.deployment(t), map[string]string{"KUBECONFIG": "/etc/kube-nats-relay/kubeconfig/config", "RELAY_LEADER_ELECT": "true"})
}

// TestRelayWithShortNamesAsTheChartsServiceAccount renders resources written as short names
// (cm, deploy), creates the chart's ServiceAccount and RBAC for real and runs the relay with
// the chart's environment as that ServiceAccount: the relay resolves the short names through
// discovery and the chart's grants cover what it resolved, so both resources are relayed.
func TestRelayWithShortNamesAsTheChartsServiceAccount(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	name := relaytest.Name(t)
	ensureNamespace(t, cs, name)

	r := render(t, name, nil, []string{"relay.resources={cm,deploy}", "relay.namespaces={" + name + "}"})
	// ServiceAccount, the Role and RoleBinding of the resources, those of the Lease.
	kubeconfig := chartIdentity(t, r, name, 5)
	vars := chartVars(t, r, name, kubeconfig)
	if vars["RELAY_RESOURCES"] != "cm,deploy" {
		t.Fatalf("the chart set RELAY_RESOURCES=%q, want cm,deploy", vars["RELAY_RESOURCES"])
	}
	p := relaytest.Start(t, relayBin, vars)
	waitLine(t, p, `"message":"became leader"`)

	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "short"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "short"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "short"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(name).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	js := relaytest.JetStream(t, env)
	prefix := "kube." + vars["RELAY_CLUSTER"]
	waitSubject(t, js, vars["RELAY_STREAM"], prefix+".core.v1.configmaps."+name+".short.added")
	waitSubject(t, js, vars["RELAY_STREAM"], prefix+".apps.v1.deployments."+name+".short.added")
	if strings.Contains(p.Output(), "forbidden") {
		t.Errorf("the relay was refused something:\n%s", p.Output())
	}
	p.Stop(t)
}

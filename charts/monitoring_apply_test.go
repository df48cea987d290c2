package charts_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// ensurePrometheusRuleCRD installs the stand-in PrometheusRule CRD and waits until it serves.
func ensurePrometheusRuleCRD(t *testing.T) {
	t.Helper()
	applyManifests(t, string(mustRead(t, "testdata/prometheusrule-crd.yaml")), false)
	if out, stderr, err := kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/prometheusrules.monitoring.coreos.com"); err != nil {
		t.Fatalf("PrometheusRule CRD not established: %v\n%s%s", err, out, stderr)
	}
	waitServed(t, "prometheusrules", true)
}

// TestMonitoringObjectsApply creates the ServiceMonitor, PrometheusRule and dashboard
// ConfigMap on the real apiserver (with the stand-in CRDs), and shows that a malformed rule
// would be noticed.
func TestMonitoringObjectsApply(t *testing.T) {
	cs := kubeClient(t)
	ensureServiceMonitorCRD(t)
	ensurePrometheusRuleCRD(t)
	ns := relaytest.Name(t)
	ensureNamespace(t, cs, ns)
	r := render(t, ns, []string{"monitoring.yaml"}, nil)
	var docs []string
	for _, o := range r.objs {
		switch o.Kind {
		case "ServiceMonitor", "PrometheusRule", "ConfigMap":
			docs = append(docs, string(o.JSON))
		}
	}
	if len(docs) != 3 {
		t.Fatalf("rendered %d monitoring objects, want a ServiceMonitor, a PrometheusRule and a ConfigMap", len(docs))
	}
	applyManifests(t, strings.Join(docs, "\n---\n"), false)

	out, stderr, err := kubectl(t, "get", "prometheusrule", "-n", ns, fullname, "-o", "json")
	if err != nil {
		t.Fatalf("get the stored PrometheusRule: %v\n%s", err, stderr)
	}
	var stored prometheusRule
	if err := json.Unmarshal([]byte(out), &stored); err != nil {
		t.Fatal(err)
	}
	if got, want := stored.Spec.Groups, r.prometheusRule(t).Spec.Groups; !reflect.DeepEqual(got, want) {
		t.Errorf("stored PrometheusRule groups differ from the rendered ones:\n%s\n%s", mustJSON(t, got), mustJSON(t, want))
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), fullname+"-dashboard", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the dashboard ConfigMap: %v", err)
	}
	checkDashboardConfigMap(t, cm, map[string]string{"grafana_dashboard": "1"})

	// The stand-in CRD checks what the operator's does: a rule whose for is no duration (in a
	// namespace of its own, so that nothing but the schema can refuse it).
	badNS := ns + "-bad"
	ensureNamespace(t, cs, badNS)
	bad := render(t, badNS, nil, []string{"prometheusRule.enabled=true", "prometheusRule.extraRules[0].alert=Bad",
		"prometheusRule.extraRules[0].expr=vector(1)", "prometheusRule.extraRules[0].for=5 minutes"})
	for _, o := range bad.all("PrometheusRule") {
		path := t.TempDir() + "/bad.json"
		writeFile(t, path, o.JSON)
		if out, stderr, err := kubectl(t, "apply", "--server-side", "--dry-run=server", "-f", path); err == nil || !strings.Contains(stderr, `.for: Invalid value: "5 minutes"`) {
			t.Errorf("a rule with for: 5 minutes was accepted (err %v):\n%s%s", err, out, stderr)
		}
	}
}

// checkDashboardConfigMap checks that cm carries the chart's dashboard file, unchanged, and
// the labels.
func checkDashboardConfigMap(t *testing.T, cm *corev1.ConfigMap, labels map[string]string) {
	t.Helper()
	for k, v := range labels {
		if cm.Labels[k] != v {
			t.Errorf("dashboard ConfigMap labels %v, want %s=%q", cm.Labels, k, v)
		}
	}
	want := strings.TrimSpace(string(mustRead(t, dashboardFile)))
	if got := cm.Data["kube-nats-relay.json"]; got != want {
		t.Errorf("dashboard ConfigMap data differs from %s (%d bytes, want %d)", dashboardFile, len(got), len(want))
	}
}

func TestTemplateGrafanaDashboard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sets   []string
		ns     string
		labels map[string]string
	}{
		{"the sidecar's default label", []string{"grafanaDashboard.enabled=true"}, releaseNS, map[string]string{"grafana_dashboard": "1"}},
		{"another label, another namespace", []string{"grafanaDashboard.enabled=true", "grafanaDashboard.labels.grafana_dashboard=null",
			"grafanaDashboard.labels.dashboards=relay", "grafanaDashboard.namespace=grafana"}, "grafana", map[string]string{"dashboards": "relay", "grafana_dashboard": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cm corev1.ConfigMap
			render(t, releaseNS, nil, tc.sets).decode(t, "ConfigMap", &cm)
			if cm.Namespace != tc.ns {
				t.Errorf("dashboard ConfigMap in namespace %q, want %q", cm.Namespace, tc.ns)
			}
			checkDashboardConfigMap(t, &cm, tc.labels)
		})
	}
	for _, o := range render(t, releaseNS, nil, nil).all("ConfigMap") {
		if o.Name == fullname+"-dashboard" {
			t.Errorf("the dashboard ConfigMap is rendered by default, want it only with grafanaDashboard.enabled")
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

package charts_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// The Prometheus Operator's kinds the chart renders.
const (
	serviceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"
	prometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"
)

// monitoringAPIVersions tells helm template that the cluster serves the Prometheus Operator's
// kinds; render and renderRaw pass it.
var monitoringAPIVersions = []string{"--api-versions", serviceMonitorAPI, "--api-versions", prometheusRuleAPI}

const (
	// docsRelease is the release (and namespace) docs/operations.md renders the alerts for.
	docsRelease   = "kube-nats-relay"
	operationsDoc = "../docs/operations.md"
	dashboardFile = chartDir + "/dashboards/kube-nats-relay.json"
)

// alertRule is one rule of a PrometheusRule (or of a Prometheus rule file).
type alertRule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ruleGroup is a group of rules.
type ruleGroup struct {
	Name  string      `json:"name"`
	Rules []alertRule `json:"rules"`
}

// prometheusRule is the rendered PrometheusRule.
type prometheusRule struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

func (r *rendered) prometheusRule(t *testing.T) *prometheusRule {
	t.Helper()
	var pr prometheusRule
	r.decode(t, "PrometheusRule", &pr)
	if len(pr.Spec.Groups) != 1 {
		t.Fatalf("PrometheusRule has %d groups, want 1", len(pr.Spec.Groups))
	}
	return &pr
}

// templateArgs starts a helm template command line for release in ns without the
// Prometheus Operator's kinds, for the test apiserver's Kubernetes version (as render).
func templateArgs(t *testing.T, release, ns string) []string {
	t.Helper()
	return []string{"template", release, chartDir, "--namespace", ns, "--kube-version", kubeVersion(t)}
}

// renderRelease runs helm template for another release name than render's, as if the
// cluster served the Prometheus Operator's kinds.
func renderRelease(t *testing.T, release, ns string, sets ...string) *rendered {
	t.Helper()
	args := append(templateArgs(t, release, ns), monitoringAPIVersions...)
	out, err := run(t, tool(t, "helm"), append(args, helmArgs(nil, sets)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeRendered(t, out)
}

// TestMonitoringNeedsTheOperatorsAPIs: a ServiceMonitor or PrometheusRule asked of a cluster
// that does not serve the kind fails the render with a message that says what to do, instead
// of an install that stops half-way on "no matches for kind".
func TestMonitoringNeedsTheOperatorsAPIs(t *testing.T) {
	helm := tool(t, "helm")
	for _, tc := range []struct{ value, api string }{
		{"serviceMonitor.enabled", serviceMonitorAPI},
		{"prometheusRule.enabled", prometheusRuleAPI},
	} {
		t.Run(tc.value, func(t *testing.T) {
			want := []string{tc.value + "=true needs the " + tc.api + " API", "install the Prometheus Operator's CRDs", "--api-versions " + tc.api}
			out, err := run(t, helm, append(templateArgs(t, "relay", releaseNS), "--set", tc.value+"=true")...)
			if err == nil {
				t.Fatalf("helm template without the %s API succeeded, want it refused:\n%s", tc.api, out)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("helm template error lacks %q:\n%v", w, err)
				}
			}
			// helm lint renders in lint mode, where fail is an INFO line and the rest is linted.
			lint := exec.Command(helm, "lint", chartDir, "--strict", "--debug", "--set", tc.value+"=true")
			lint.Env = append(os.Environ(), "HOME="+t.TempDir())
			b, err := lint.CombinedOutput()
			if err != nil || !strings.Contains(string(b), "[INFO] Fail: "+want[0]) {
				t.Errorf("helm lint: got %v, want a pass that logs %q\n%s", err, want[0], b)
			}
			// The good neighbour: the API served, the object rendered.
			if _, err := run(t, helm, append(templateArgs(t, "relay", releaseNS), "--set", tc.value+"=true", "--api-versions", tc.api)...); err != nil {
				t.Errorf("helm template with the %s API: %v", tc.api, err)
			}
		})
	}
}

// TestHelmInstallWithoutThePrometheusRuleCRD installs with prometheusRule.enabled on the real
// apiserver before the CRD exists: helm refuses at render time, naming the value, and leaves
// nothing behind.
func TestHelmInstallWithoutThePrometheusRuleCRD(t *testing.T) {
	cs := kubeClient(t)
	if out, stderr, err := kubectl(t, "delete", "crd", "prometheusrules.monitoring.coreos.com", "--ignore-not-found", "--wait"); err != nil {
		t.Fatalf("delete the PrometheusRule CRD: %v\n%s%s", err, out, stderr)
	}
	waitServed(t, "prometheusrules", false)
	ns := relaytest.Name(t)
	ensureNamespace(t, cs, ns)
	out, err := helmCluster(t, "install", "relay", chartDir, "--namespace", ns, "--set", "prometheusRule.enabled=true")
	if err == nil {
		_, _ = helmCluster(t, "uninstall", "relay", "--namespace", ns)
		t.Fatalf("helm install without the PrometheusRule CRD succeeded:\n%s", out)
	}
	if !strings.Contains(err.Error(), "prometheusRule.enabled=true needs the "+prometheusRuleAPI+" API") {
		t.Errorf("helm install error does not explain the missing CRD:\n%v", err)
	}
	if d, err := cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(d.Items) != 0 {
		t.Errorf("after the refused install: %d Deployments (err %v), want none", len(d.Items), err)
	}
}

// waitServed waits until the apiserver's discovery of monitoring.coreos.com/v1 does (or does
// not) list resource.
func waitServed(t *testing.T, resource string, want bool) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		served := err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
		return served == want, nil
	})
	if err != nil {
		t.Fatalf("monitoring.coreos.com/v1 %s served: want %v: %v", resource, want, err)
	}
}

// TestLintMonitoring lints the chart with every monitoring option set: helm lint renders in
// lint mode, where the missing API is only logged, and checks the rest.
func TestLintMonitoring(t *testing.T) {
	args := append([]string{"lint", chartDir, "--strict", "--namespace", releaseNS}, helmArgs([]string{"monitoring.yaml"}, nil)...)
	out, err := run(t, tool(t, "helm"), args...)
	if err != nil || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
		t.Errorf("helm lint: %v\n%s", err, out)
	}
}

func TestTemplateServiceMonitorOptions(t *testing.T) {
	type endpoint struct {
		Interval          string           `json:"interval"`
		ScrapeTimeout     string           `json:"scrapeTimeout"`
		HonorLabels       *bool            `json:"honorLabels"`
		Relabelings       []map[string]any `json:"relabelings"`
		MetricRelabelings []map[string]any `json:"metricRelabelings"`
	}
	type serviceMonitor struct {
		Spec struct {
			Endpoints []endpoint `json:"endpoints"`
		} `json:"spec"`
	}
	var sm serviceMonitor
	render(t, releaseNS, []string{"monitoring.yaml"}, nil).decode(t, "ServiceMonitor", &sm)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	got := sm.Spec.Endpoints[0]
	want := endpoint{Interval: "15s", ScrapeTimeout: "10s", HonorLabels: new(true),
		Relabelings:       []map[string]any{{"targetLabel": "cluster", "replacement": "prod"}},
		MetricRelabelings: []map[string]any{{"sourceLabels": []any{"__name__"}, "regex": "go_.*", "action": "drop"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceMonitor endpoint:\ngot  %s\nwant %s", mustJSON(t, got), mustJSON(t, want))
	}

	// Defaults: the target's labels win, nothing relabelled.
	sm = serviceMonitor{}
	render(t, releaseNS, []string{"servicemonitor.yaml"}, nil).decode(t, "ServiceMonitor", &sm)
	got = sm.Spec.Endpoints[0]
	if got.HonorLabels == nil || *got.HonorLabels || got.Relabelings != nil || got.MetricRelabelings != nil {
		t.Errorf("default ServiceMonitor endpoint %s, want honorLabels false and no relabelings", mustJSON(t, got))
	}
}

// selectorAfterMetric finds each metric of the relay in an expression and what follows it.
var selectorAfterMetric = regexp.MustCompile(`kube_nats_relay_[a-z_]+(\{[^}]*\})?`)

func TestTemplatePrometheusRule(t *testing.T) {
	t.Run("every expression selects the release", func(t *testing.T) {
		pr := renderRelease(t, "relay", "monitoring", "prometheusRule.enabled=true").prometheusRule(t)
		sel := `{job="relay-kube-nats-relay",namespace="monitoring"`
		for _, r := range pr.Spec.Groups[0].Rules {
			for _, m := range selectorAfterMetric.FindAllStringSubmatch(r.Expr, -1) {
				if !strings.HasPrefix(m[1], sel) {
					t.Errorf("%s: %s selects %q, want it to start with %s}", r.Alert, m[0], m[1], sel)
				}
			}
			if r.Labels["severity"] == "" || r.For == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: severity %q, for %q, annotations %v: want all set", r.Alert, r.Labels["severity"], r.For, r.Annotations)
			}
		}
		pr = renderRelease(t, "relay", "monitoring", "prometheusRule.enabled=true", `prometheusRule.selector=cluster="a"`).prometheusRule(t)
		for _, r := range pr.Spec.Groups[0].Rules {
			if !strings.Contains(r.Expr, `{cluster="a"`) || strings.Contains(r.Expr, "job=") {
				t.Errorf("%s with prometheusRule.selector: %s", r.Alert, r.Expr)
			}
		}
	})

	t.Run("options", func(t *testing.T) {
		pr := render(t, releaseNS, []string{"monitoring.yaml"}, nil).prometheusRule(t)
		if pr.Metadata.Labels["release"] != "prometheus" {
			t.Errorf("PrometheusRule labels %v, want prometheusRule.labels included", pr.Metadata.Labels)
		}
		rules := pr.Spec.Groups[0].Rules
		byName := map[string]alertRule{}
		for _, r := range rules {
			byName[r.Alert+r.Record] = r
			if r.Alert != "" && r.Labels["team"] != "platform" {
				t.Errorf("%s labels %v, want alertLabels added", r.Alert, r.Labels)
			}
		}
		if r := byName["KubeNatsRelayNATSDisconnected"]; r.For != "5m" || r.Labels["severity"] != "page" {
			t.Errorf("overridden alert: for %q severity %q, want 5m and page", r.For, r.Labels["severity"])
		}
		if r := byName["KubeNatsRelayCheckpointStale"]; r.For != "2m" || r.Labels["severity"] != "warning" {
			t.Errorf("alert left alone: for %q severity %q, want its defaults 2m and warning", r.For, r.Labels["severity"])
		}
		if _, ok := byName["KubeNatsRelayHistoryExpired"]; ok {
			t.Errorf("KubeNatsRelayHistoryExpired rendered, want it left out (enabled: false)")
		}
		if last := rules[len(rules)-1]; last.Record != "kube_nats_relay:events_published:rate5m" {
			t.Errorf("last rule %+v, want the extra recording rule", last)
		}
	})

	t.Run("the schema knows every alert", func(t *testing.T) {
		var schema struct {
			Properties struct {
				PrometheusRule struct {
					Properties struct {
						Alerts struct {
							Properties map[string]any `json:"properties"`
						} `json:"alerts"`
					} `json:"properties"`
				} `json:"prometheusRule"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(mustRead(t, chartDir+"/values.schema.json"), &schema); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range render(t, releaseNS, nil, []string{"prometheusRule.enabled=true"}).prometheusRule(t).Spec.Groups[0].Rules {
			names = append(names, r.Alert)
		}
		slices.Sort(names)
		if got := keys(schema.Properties.PrometheusRule.Properties.Alerts.Properties); !slices.Equal(got, names) {
			t.Errorf("values.schema.json prometheusRule.alerts against the rendered alerts: %s", diff(got, names))
		}
	})
}

// TestAlertsInOperationsDoc: docs/operations.md quotes the chart's alerts, as rendered for a
// release kube-nats-relay in namespace kube-nats-relay, exactly: the same names, expressions,
// durations, severities and texts.
func TestAlertsInOperationsDoc(t *testing.T) {
	pr := renderRelease(t, docsRelease, docsRelease, "prometheusRule.enabled=true").prometheusRule(t)
	doc := string(mustRead(t, operationsDoc))
	const start = "```yaml\n# kube-nats-relay alerts"
	i := strings.Index(doc, start)
	if i < 0 {
		t.Fatalf("%s has no block starting %q", operationsDoc, start)
	}
	block := doc[i+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	var quoted struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict([]byte(block), &quoted); err != nil {
		t.Fatalf("the alerts block of %s: %v", operationsDoc, err)
	}
	if !reflect.DeepEqual(quoted.Groups, pr.Spec.Groups) {
		want, _ := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
		t.Errorf("the alerts in %s differ from the chart's; the chart renders:\n%s", operationsDoc, want)
	}
	// Every alert is explained below the block.
	for _, r := range pr.Spec.Groups[0].Rules {
		if !strings.Contains(doc, "- `"+r.Alert+"`") {
			t.Errorf("%s does not explain %s (a list item starting - `%s`)", operationsDoc, r.Alert, r.Alert)
		}
	}
}

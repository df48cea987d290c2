package charts_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"` // a string, or {"query": "..."}
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

// labelValues is a Grafana variable query: label_values(<selector>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]+\)$`)

// grafanaVars are Grafana's own interval variables, replaced by a duration for parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// query is one PromQL expression of the alerts or the dashboard, and the labels its legend or
// annotations show.
type query struct {
	expr  string
	shows []string
}

// legendLabel and annotationLabel find the labels a legend ({{resource}}) or an alert's
// annotation ({{ $labels.resource }}) shows.
var (
	legendLabel     = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	annotationLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// submatches returns the first group of every match of re in s.
func submatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// dashboardQueries returns every PromQL expression of the dashboard by where it is, with
// Grafana's interval variables replaced; the dashboard's own variables ($job) sit in label
// values, where PromQL takes them as text.
func dashboardQueries(t *testing.T) map[string]query {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(mustRead(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string]query{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("%s: panel id %d twice", dashboardFile, p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
		}
		for i, tg := range p.Targets {
			out["panel "+p.Title+" #"+string(rune('A'+i))] = query{grafanaVars.Replace(tg.Expr), submatches(legendLabel, tg.LegendFormat)}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sel := labelValues.FindStringSubmatch(q)
		if sel == nil {
			t.Errorf("%s: variable %s query %q, want label_values(<selector>, <label>)", dashboardFile, v.Name, q)
			continue
		}
		out["variable "+v.Name] = query{expr: sel[1]}
	}
	return out
}

// promqlResult is promql-check's answer for one expression.
type promqlResult struct {
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
	Labels  []string `json:"labels"`
	Error   string   `json:"error"`
}

// parsePromQL parses the expressions with the Prometheus parser (promql-check, built by
// `make tools`) and returns the metric names each one reads, by the same keys.
func parsePromQL(t *testing.T, queries map[string]query) map[string]promqlResult {
	t.Helper()
	names := keys(queries)
	var in []string
	for _, n := range names {
		in = append(in, queries[n].expr)
	}
	cmd := exec.Command(tool(t, "promql-check"))
	cmd.Stdin = strings.NewReader(mustJSON(t, in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promql-check: %v", err)
	}
	var res []promqlResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(in) {
		t.Fatalf("promql-check answered %d results for %d expressions (%v):\n%s", len(res), len(in), err, out)
	}
	byName := map[string]promqlResult{}
	for i, n := range names {
		byName[n] = res[i]
	}
	return byName
}

// typeLine is a metric family's # TYPE line.
var typeLine = regexp.MustCompile(`(?m)^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$`)

// seriesLine is one sample line: the series name and its labels.
var (
	seriesLine = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^\n]*\})? \S+$`)
	labelName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// targetLabels are the labels Prometheus (through the operator's ServiceMonitor) adds to
// every scraped series.
var targetLabels = []string{"job", "namespace", "pod", "instance", "service", "endpoint", "container"}

// exposedMetrics returns, for every series name a /metrics text holds (a histogram's
// _bucket, _sum and _count included), the names of its labels.
func exposedMetrics(text string) map[string][]string {
	out := map[string][]string{}
	for _, m := range seriesLine.FindAllStringSubmatch(text, -1) {
		ls := out[m[1]]
		for _, l := range submatches(labelName, m[2]) {
			if !slices.Contains(ls, l) {
				ls = append(ls, l)
			}
		}
		out[m[1]] = ls
	}
	return out
}

// TestMonitoringQueriesReadTheRelaysMetrics runs a relay and checks every query of the chart's
// alerts and Grafana dashboard against it: each parses as PromQL, and every metric it reads is
// one the relay exports. A renamed metric or label breaks this test, not a dashboard in
// production.
func TestMonitoringQueriesReadTheRelaysMetrics(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	name := relaytest.Name(t)
	ensureNamespace(t, cs, name)
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vars := relaytest.Vars(env, name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	p := relaytest.Start(t, relayBin, vars)
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(waitLine(t, p, "serving /healthz"))
	if addr == nil {
		t.Fatalf("no address in the relay's health server line:\n%s", p.Output())
	}
	// After the initial sync published the ConfigMap: every family has its series.
	var text string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		code, body, err := get(ctx, "http://"+addr[1]+"/metrics")
		text = body
		return err == nil && code == http.StatusOK && strings.Contains(body, "kube_nats_relay_pipeline_lag_seconds_bucket{") &&
			strings.Contains(body, "kube_nats_relay_checkpoint_timestamp_seconds{"), nil
	})
	if err != nil {
		t.Fatalf("the relay's /metrics never showed a published event and a checkpoint:\n%s", text)
	}
	exposed := exposedMetrics(text)
	p.Stop(t)

	queries := dashboardQueries(t)
	for _, r := range render(t, releaseNS, []string{"monitoring.yaml"}, nil).prometheusRule(t).Spec.Groups[0].Rules {
		queries["rule "+r.Alert+r.Record] = query{r.Expr, submatches(annotationLabel, r.Annotations["summary"]+r.Annotations["description"])}
	}
	read := map[string]bool{}
	for where, res := range parsePromQL(t, queries) {
		if res.Error != "" {
			t.Errorf("%s: %q does not parse: %s", where, res.Expr, res.Error)
			continue
		}
		if len(res.Metrics) == 0 {
			t.Errorf("%s: %q reads no metric", where, res.Expr)
		}
		known := slices.Clone(targetLabels)
		for _, m := range res.Metrics {
			read[m] = true
			ls, ok := exposed[m]
			if !ok {
				t.Errorf("%s reads %s, which the relay does not export", where, m)
			}
			known = append(known, ls...)
		}
		// Every label it matches, groups by or shows is one of its metrics' (or a target label).
		for _, l := range append(res.Labels, queries[where].shows...) {
			if !slices.Contains(known, l) {
				t.Errorf("%s uses label %s, which none of %v carries", where, l, res.Metrics)
			}
		}
	}
	// What the dashboard and the alerts are for (issue: events/s by resource, pipeline lag,
	// checkpoint age, publish errors, 410s and relists, leadership).
	for _, m := range []string{"kube_nats_relay_events_published_total", "kube_nats_relay_pipeline_lag_seconds_bucket",
		"kube_nats_relay_checkpoint_timestamp_seconds", "kube_nats_relay_publish_errors_total",
		"kube_nats_relay_resource_version_expired_total", "kube_nats_relay_lists_total", "kube_nats_relay_leader"} {
		if !read[m] {
			t.Errorf("no query reads %s", m)
		}
	}
	if !slices.ContainsFunc(keys(queries), func(k string) bool { return strings.HasPrefix(k, "panel ") }) {
		t.Errorf("no dashboard panel query found in %s", dashboardFile)
	}
}

package main

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// healthAddr returns the address the relay serves its probes and metrics on.
func healthAddr(t *testing.T, r *relayProc) string {
	t.Helper()
	waitOutput(t, r, "serving /healthz and /readyz")
	m := healthAddrRe.FindStringSubmatch(r.Output())
	if m == nil {
		t.Fatalf("no health address in the output:\n%s", r.Output())
	}
	return m[1]
}

// scrape returns the relay's /metrics as text.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	code, body := probe(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: got %d %q, want 200", code, body)
	}
	return body
}

// metricValue returns the value of the series written exactly as series (name and labels in
// the order the exposition format sorts them), and whether it exists.
func metricValue(text, series string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return math.NaN(), false
}

// metricSum adds up every series of the metric name.
func metricSum(text, name string) float64 {
	sum := 0.0
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// waitMetric waits until the series reaches at least want.
func waitMetric(t *testing.T, addr, series string, want float64) {
	t.Helper()
	var got float64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		v, ok := metricValue(scrape(t, addr), series)
		got = v
		return ok && v >= want, nil
	})
	if err != nil {
		t.Fatalf("%s: got %v, want at least %v", series, got, want)
	}
}

func TestMetricsCountWhatTheRelayDoesAndShowNoSecrets(t *testing.T) {
	ctx := context.Background()
	auth := mustAuth(t, authUserPassword)
	srv := startAuthNATS(t, auth)
	name := testName(t)
	namespaceWithConfigMap(t, name)
	vars := authRelayVars(name, srv, auth)
	r := startRelay(t, vars)
	addr := healthAddr(t, r)
	waitProbe(t, addr, "/readyz", http.StatusOK, "ok")

	// A uniquely named object: its name must never become a label.
	cs := kubeClient(t)
	objName := "metrics-" + name
	cms := cs.CoreV1().ConfigMaps(name)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: objName}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		cm, err := cms.Get(ctx, objName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["n"] = strconv.Itoa(i)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.Delete(ctx, objName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	const res = `resource="configmaps"`
	waitMetric(t, addr, `kube_nats_relay_events_published_total{origin="live",`+res+`,type="deleted"}`, 1)
	text := scrape(t, addr)
	for _, tt := range []struct {
		series string
		want   float64
	}{
		{`kube_nats_relay_events_published_total{origin="initial-sync",` + res + `,type="added"}`, 1},
		{`kube_nats_relay_events_published_total{origin="live",` + res + `,type="added"}`, 1},
		{`kube_nats_relay_events_published_total{origin="live",` + res + `,type="modified"}`, 3},
		{`kube_nats_relay_events_published_total{origin="live",` + res + `,type="deleted"}`, 1},
		{`kube_nats_relay_lists_total{origin="initial-sync",` + res + `}`, 1},
		{`kube_nats_relay_lists_total{origin="relist",` + res + `}`, 0},
		{`kube_nats_relay_resource_version_expired_total{` + res + `}`, 0},
		{`kube_nats_relay_resource_version_ahead_total{` + res + `}`, 0},
		{`kube_nats_relay_events_oversize_total{` + res + `}`, 0},
		{`kube_nats_relay_publish_errors_total{` + res + `}`, 0},
		{`kube_nats_relay_publish_retries_total{` + res + `}`, 0},
		{`kube_nats_relay_replays_suppressed_total{by="index",` + res + `}`, 0},
		{`kube_nats_relay_replays_suppressed_total{by="dedup",` + res + `}`, 0},
		{`kube_nats_relay_publish_duration_seconds_count{` + res + `}`, 6},
		{`kube_nats_relay_pipeline_lag_seconds_count{` + res + `}`, 6},
		{`kube_nats_relay_buffer_capacity{` + res + `,watched_namespace="` + name + `"}`, 1024},
		{`kube_nats_relay_buffer_used{` + res + `,watched_namespace="` + name + `"}`, 0},
		{`kube_nats_relay_resource_watching{` + res + `,watched_namespace="` + name + `"}`, 1},
		{`kube_nats_relay_nats_connected`, 1},
		{`kube_nats_relay_nats_reconnects_total`, 0},
		{`kube_nats_relay_leader`, 1},
	} {
		got, ok := metricValue(text, tt.series)
		if !ok {
			t.Errorf("%s: missing", tt.series)
			continue
		}
		// Counters are exact here: nothing else writes to the namespace.
		if got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.series, got, tt.want)
		}
	}
	source := `{` + res + `,watched_namespace="` + name + `"}`
	age, ok := metricValue(text, `kube_nats_relay_checkpoint_age_seconds`+source)
	if !ok || age < 0 || age > 60 {
		t.Errorf("checkpoint age: got %v (present %v), want 0-60s: the checkpoint was saved moments ago", age, ok)
	}
	checkpointed, ok := metricValue(text, `kube_nats_relay_checkpoint_timestamp_seconds`+source)
	if now := float64(time.Now().Unix()); !ok || checkpointed < now-60 || checkpointed > now+1 {
		t.Errorf("checkpoint timestamp: got %v (present %v), want within the last 60s of %v", checkpointed, ok, now)
	}
	checkBuildInfo(t, text)
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "kube_nats_relay_") && namespaceLabel.MatchString(line) {
			t.Errorf("a series labelled namespace, which the Prometheus Operator renames exported_namespace: %s", line)
		}
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(text, "\n"+family+" ") {
			t.Errorf("%s: missing (Go and process collectors)", family)
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "kube_nats_relay_") && strings.Contains(line, objName) {
			t.Errorf("an object name became a label: %s", line)
		}
		if strings.HasPrefix(line, "# HELP kube_nats_relay_") && len(line) < len("# HELP kube_nats_relay_x  ")+10 {
			t.Errorf("metric without help text: %s", line)
		}
	}

	// No secret on any endpoint.
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		_, body := probe(t, addr, path)
		for _, secret := range secretsOf(t, auth) {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows a NATS secret", path)
			}
		}
	}
	waitProbe(t, addr, "/healthz", http.StatusOK, "ok")

	// The next change moves the checkpoint, and its timestamp with it.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: objName + "-2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var later float64
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		later, _ = metricValue(scrape(t, addr), `kube_nats_relay_checkpoint_timestamp_seconds`+source)
		return later > checkpointed, nil
	})
	if err != nil {
		t.Errorf("checkpoint timestamp after a change: got %v, want past %v", later, checkpointed)
	}
	r.stop(t)
}

// namespaceLabel finds a label named exactly namespace in a series line.
var namespaceLabel = regexp.MustCompile(`[{,]namespace="`)

// buildInfoLine is kube_nats_relay_build_info's series; labels sort by name.
var buildInfoLine = regexp.MustCompile(`(?m)^kube_nats_relay_build_info\{goversion="([^"]*)",revision="([^"]*)",version="([^"]*)"\} 1$`)

// checkBuildInfo checks that the scrape has kube_nats_relay_build_info = 1 with the Go version
// the relay was built with (this test's toolchain built it) and its version.
func checkBuildInfo(t *testing.T, text string) {
	t.Helper()
	m := buildInfoLine.FindStringSubmatch(text)
	if m == nil {
		t.Errorf("kube_nats_relay_build_info{goversion,revision,version} 1: missing")
		return
	}
	if m[1] != runtime.Version() {
		t.Errorf("build_info goversion: got %q, want %q", m[1], runtime.Version())
	}
	if m[3] != version {
		t.Errorf("build_info version: got %q, want %q (the binary is not stamped)", m[3], version)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
)

// sampleValue returns the value of a gauge or counter.
func sampleValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// fakeClock is a clock that moves only when told to.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time            { return c.t }
func (c *fakeClock) step(d time.Duration)      { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock                 { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func logLines(b *bytes.Buffer) []string        { return strings.Split(strings.TrimSpace(b.String()), "\n") }
func countLines(b *bytes.Buffer, s string) int { return strings.Count(b.String(), s) }

func TestAPIServerMonitorLogsFirstFailureThenOncePerIntervalPerKind(t *testing.T) {
	var logs bytes.Buffer
	clock := newFakeClock()
	m := newAPIServerMonitor(zerolog.New(&logs))
	m.now = clock.now
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	const failed = "kubernetes apiserver request failed, retrying"

	m.failed("watch", "configmaps", refused)
	if n := countLines(&logs, failed); n != 1 {
		t.Fatalf("after the first failure: got %d log lines, want 1:\n%s", n, logs.String())
	}
	// Within the interval: counted, not logged.
	for range 5 {
		clock.step(time.Second)
		m.failed("watch", "configmaps", refused)
	}
	if n := countLines(&logs, failed); n != 1 {
		t.Fatalf("5 more failures within %s: got %d log lines, want 1:\n%s", apiserverLogEvery, n, logs.String())
	}
	// Another kind has its own limit.
	m.failed("list", "secrets", refused)
	if n := countLines(&logs, failed); n != 2 {
		t.Fatalf("a failure of another kind: got %d log lines, want 2:\n%s", n, logs.String())
	}
	// Past the interval: logged with the number left out.
	clock.step(apiserverLogEvery - 5*time.Second)
	m.failed("watch", "configmaps", refused)
	lines := logLines(&logs)
	if n := countLines(&logs, failed); n != 3 || !strings.Contains(lines[len(lines)-1], `"suppressed":5`) ||
		!strings.Contains(lines[len(lines)-1], `"unreachable_for":"10s"`) || !strings.Contains(lines[len(lines)-1], "connection refused") {
		t.Fatalf("a failure %s after the first: got %d lines, the last %q; want 3, the last with suppressed 5, unreachable_for 10s and the error",
			apiserverLogEvery, n, lines[len(lines)-1])
	}
	if got := sampleValue(t, m.failures.WithLabelValues("watch", "configmaps")); got != 7 {
		t.Errorf("failures of watch configmaps: got %v, want 7 (every attempt counts, logged or not)", got)
	}
	if got := sampleValue(t, m.up); got != 0 {
		t.Errorf("apiserver_up while failing: got %v, want 0", got)
	}
	reasons := m.notReady()
	if len(reasons) != 1 || !strings.Contains(reasons[0], "unreachable for 10s (8 failed requests)") || !strings.Contains(reasons[0], "connection refused") {
		t.Errorf("notReady while failing: got %q, want the duration, the count and the last error", reasons)
	}

	// An answer clears everything, and says so once.
	clock.step(time.Second)
	m.answered()
	m.answered()
	if n := countLines(&logs, "kubernetes apiserver reachable again"); n != 1 {
		t.Errorf("after answers: got %d recovery lines, want 1:\n%s", n, logs.String())
	}
	if got := m.notReady(); got != nil {
		t.Errorf("notReady after an answer: got %q, want none", got)
	}
	if got := sampleValue(t, m.up); got != 1 {
		t.Errorf("apiserver_up after an answer: got %v, want 1", got)
	}
	// The next outage's first failure is logged at once, however soon.
	clock.step(time.Second)
	m.failed("watch", "configmaps", refused)
	if n := countLines(&logs, failed); n != 4 {
		t.Errorf("first failure of a new outage: got %d log lines, want 4:\n%s", n, logs.String())
	}
}

func TestAPIServerMonitorCountsOnlyRequestsWithoutAnswer(t *testing.T) {
	m := newAPIServerMonitor(zerolog.Nop())
	rt := m.wrap(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Host == "down" {
			return nil, errors.New("connection refused")
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody}, nil
	}))
	req := func(host string) *http.Request {
		return &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: host, Path: "/api/v1/configmaps"}}
	}
	if _, err := rt.RoundTrip(req("down").WithContext(t.Context())); err == nil {
		t.Fatal("got no error from the failing transport")
	}
	if m.notReady() == nil {
		t.Error("a request without answer: got ready, want the apiserver unreachable")
	}
	// A request we cancelled ourselves (shutdown, a watch released) is no outage.
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	m2 := newAPIServerMonitor(zerolog.Nop())
	if _, err := m2.wrap(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, context.Canceled })).
		RoundTrip(req("down").WithContext(cancelled)); err == nil {
		t.Fatal("got no error from the cancelled request")
	}
	if got := m2.notReady(); got != nil {
		t.Errorf("a cancelled request: got %q, want no outage", got)
	}
	if _, err := rt.RoundTrip(req("up").WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	if got := m.notReady(); got != nil {
		t.Errorf("an answer, even 503: got %q, want reachable (the caller reports the status)", got)
	}
}

func TestAPIServerReasonBoundsTheErrorOfAGetByALongName(t *testing.T) {
	m := newAPIServerMonitor(zerolog.Nop())
	name := strings.Repeat("n", 100_000) // RBAC names have no length limit
	err := &url.Error{Op: "Get", URL: "https://apiserver/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings/" + name,
		Err: errors.New("connect: connection refused")}
	m.failed("get", "rolebindings.rbac.authorization.k8s.io", err)
	reasons := m.notReady()
	if len(reasons) != 1 {
		t.Fatalf("got %d reasons, want 1", len(reasons))
	}
	if len(reasons[0]) > reasonErrMax+200 || !strings.Contains(reasons[0], fmt.Sprintf("(%d bytes)", len(err.Error()))) {
		t.Errorf("reason of %d bytes, want at most %d of the error and its full length noted: %.300q...", len(reasons[0]), reasonErrMax, reasons[0])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRequestKindNamesPhaseAndResource(t *testing.T) {
	tests := []struct {
		name, method, path, query string
		phase, resource           string
	}{
		{"discovery root", "GET", "/api", "", "discovery", ""},
		{"discovery groups", "GET", "/apis", "", "discovery", ""},
		{"discovery group version", "GET", "/apis/apps/v1", "", "discovery", ""},
		{"openapi index", "GET", "/openapi/v3", "", "openapi", ""},
		{"openapi document", "GET", "/openapi/v3/apis/apps/v1", "hash=ABC", "openapi", ""},
		{"core list", "GET", "/api/v1/configmaps", "limit=500", "list", "configmaps"},
		{"core list in namespace", "GET", "/api/v1/namespaces/a/configmaps", "", "list", "configmaps"},
		{"core watch", "GET", "/api/v1/namespaces/a/configmaps", "watch=true&resourceVersion=5", "watch", "configmaps"},
		{"core get", "GET", "/api/v1/namespaces/a/configmaps/x", "", "get", "configmaps"},
		{"namespaces list", "GET", "/api/v1/namespaces", "", "list", "namespaces"},
		{"namespace get", "GET", "/api/v1/namespaces/a", "", "get", "namespaces"},
		{"group watch", "GET", "/apis/apps/v1/deployments", "watch=1", "watch", "deployments.apps"},
		{"lease update", "PUT", "/apis/coordination.k8s.io/v1/namespaces/a/leases/relay", "", "put", "leases.coordination.k8s.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &http.Request{Method: tt.method, URL: &url.URL{Path: tt.path, RawQuery: tt.query}}
			phase, resource := requestKind(req)
			if phase != tt.phase || resource != tt.resource {
				t.Errorf("got %q %q, want %q %q", phase, resource, tt.phase, tt.resource)
			}
		})
	}
}

func TestReadinessAlwaysChecksApplyWhileStartingAndAfter(t *testing.T) {
	var r readiness
	var down []string
	r.setAlways(func() []string { return down })
	if got := r.notReady(); len(got) != 1 || got[0] != "starting" {
		t.Errorf("starting, apiserver fine: got %q, want [starting]", got)
	}
	down = []string{"kubernetes apiserver unreachable"}
	if got := r.notReady(); len(got) != 2 || got[0] != "starting" || got[1] != down[0] {
		t.Errorf("starting, apiserver down: got %q, want starting and the apiserver", got)
	}
	r.set(func() []string { return []string{"nats: RECONNECTING"} })
	if got := r.notReady(); len(got) != 2 || got[0] != down[0] || got[1] != "nats: RECONNECTING" {
		t.Errorf("running, both down: got %q, want the apiserver and nats", got)
	}
	down = nil
	r.set()
	if got := r.notReady(); got != nil {
		t.Errorf("running, all fine: got %q, want ready", got)
	}
}

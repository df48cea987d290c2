package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// apiserverLogEvery is the least time between two log lines about failing requests of one
// kind (phase and resource). The first failure is logged at once; during an outage of
// minutes each kind then gets one line every 10 s with the number of failures left out,
// instead of a line per retry (client-go retries some failures itself, every second).
const apiserverLogEvery = 10 * time.Second

// apiserverMonitor watches every request to the apiserver at the transport, below
// client-go's own retries, so that no failed attempt goes unseen: it logs failures
// (rate-limited per kind), gives /readyz the reason while the apiserver cannot be reached,
// and exports kube_nats_relay_apiserver_up and kube_nats_relay_apiserver_request_failures_total.
//
// A failure is a request that got no HTTP answer (connection refused, timeout, TLS or
// connection lost before the response). Any answer, errors included, means the apiserver is
// reachable: what it answered is for the caller to handle and report.
type apiserverMonitor struct {
	// now is the clock; tests replace it.
	now func() time.Time
	log zerolog.Logger

	up       prometheus.Gauge
	failures *prometheus.CounterVec

	mu sync.Mutex
	// failingSince is when the first failure after the last answer happened; zero while
	// the apiserver answers.
	failingSince time.Time
	failedCount  int
	lastErr      error
	// logged holds, per request kind, when its last failure was logged and how many
	// failures were left out since.
	logged map[string]*logWindow
}

// logWindow is the rate limit state of one request kind.
type logWindow struct {
	last       time.Time
	suppressed int
}

func newAPIServerMonitor(log zerolog.Logger) *apiserverMonitor {
	m := &apiserverMonitor{
		now: time.Now,
		log: log,
		up: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "apiserver_up",
			Help: "1 while the Kubernetes apiserver answers the relay's requests, 0 from a request that got no answer (refused, timed out, connection lost) until the next answer."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "apiserver_request_failures_total",
			Help: "Requests to the Kubernetes apiserver that got no answer, client-go's own retries included, by phase (discovery, openapi, list, watch, get, ...) and resource."},
			[]string{"phase", "resource"}),
		logged: make(map[string]*logWindow),
	}
	m.up.Set(1)
	return m
}

// collectors returns the monitor's metrics, for registration.
func (m *apiserverMonitor) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.up, m.failures}
}

// wrap returns rt reporting every request's outcome to m; use it as rest.Config.WrapTransport.
func (m *apiserverMonitor) wrap(rt http.RoundTripper) http.RoundTripper {
	return &monitoredTransport{next: rt, m: m}
}

// monitoredTransport is an http.RoundTripper that reports to an apiserverMonitor.
type monitoredTransport struct {
	next http.RoundTripper
	m    *apiserverMonitor
}

func (t *monitoredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	switch {
	case err == nil:
		t.m.answered()
	case !errors.Is(req.Context().Err(), context.Canceled):
		// Not our own cancellation (shutdown, a watch released); a passed deadline is a
		// request that got no answer in time, and counts.
		phase, resource := requestKind(req)
		t.m.failed(phase, resource, err)
	}
	return resp, err
}

// answered records an answer: the apiserver is reachable again if it was not.
func (m *apiserverMonitor) answered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failingSince.IsZero() {
		return
	}
	m.log.Info().Int("failed_requests", m.failedCount).Stringer("unreachable_for", m.now().Sub(m.failingSince).Round(time.Millisecond)).
		Msg("kubernetes apiserver reachable again")
	m.failingSince, m.failedCount, m.lastErr = time.Time{}, 0, nil
	clear(m.logged) // the next outage's first failure is logged at once
	m.up.Set(1)
}

// failed records a request of phase and resource that got no answer, and logs it unless a
// failure of the same kind was logged less than apiserverLogEvery ago.
func (m *apiserverMonitor) failed(phase, resource string, err error) {
	m.failures.WithLabelValues(phase, resource).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.failingSince.IsZero() {
		m.failingSince = now
	}
	m.failedCount++
	m.lastErr = err
	m.up.Set(0)

	kind := phase + " " + resource
	w := m.logged[kind]
	if w != nil && now.Sub(w.last) < apiserverLogEvery {
		w.suppressed++
		return
	}
	ev := m.log.Warn().Err(err).Str("phase", phase).Str("resource", resource).
		Stringer("unreachable_for", now.Sub(m.failingSince).Round(time.Millisecond))
	if w != nil {
		ev = ev.Int("suppressed", w.suppressed)
	}
	ev.Msg("kubernetes apiserver request failed, retrying")
	m.logged[kind] = &logWindow{last: now}
}

// notReady returns why the apiserver cannot be used, for /readyz; nil while it answers.
func (m *apiserverMonitor) notReady() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failingSince.IsZero() {
		return nil
	}
	return []string{fmt.Sprintf("kubernetes apiserver unreachable for %s (%d failed requests): %s",
		m.now().Sub(m.failingSince).Round(time.Second), m.failedCount, boundReason(m.lastErr.Error()))}
}

// reasonErrMax bounds the error quoted in /readyz: it holds the request's URL, and a get by
// name carries the object's name, which for some resources (RBAC) has no length limit. The
// log line has it whole.
const reasonErrMax = 512

// boundReason cuts s to reasonErrMax bytes, noting its full length.
func boundReason(s string) string {
	if len(s) <= reasonErrMax {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:reasonErrMax], ""), len(s))
}

// requestKind names what a request to the apiserver does: its phase (discovery, openapi,
// list, watch, get, or the lower-case method of a write) and its resource ("configmaps",
// "leases.coordination.k8s.io"; "" for discovery and openapi).
func requestKind(req *http.Request) (phase, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... and /apis/<group>/<version>/...
	var group string
	switch {
	case parts[0] == "openapi": // the schemas read at startup (loadSchemas)
		return "openapi", ""
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "discovery", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaces/<ns>/<resource>...
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	switch {
	case req.Method != http.MethodGet:
		phase = strings.ToLower(req.Method)
	case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
		phase = "watch"
	case len(parts) == 1:
		phase = "list"
	default:
		phase = "get"
	}
	return phase, resource
}

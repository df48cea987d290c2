package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestHealthEndpointsReportRoleAndReasons(t *testing.T) {
	ready, live := &readiness{}, &readiness{}
	addr, stop, err := serveHealth(context.Background(), "127.0.0.1:0", ready, live,
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics\n")) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	var wedged, notReady []string
	role := "standby relay-1 (leader relay-0)"
	tests := []struct {
		name             string
		setup            func()
		path             string
		wantCode         int
		wantBody, noBody string
	}{
		{"starting: alive", func() {}, "/healthz", http.StatusOK, "ok", ""},
		{"starting: not ready", func() {}, "/readyz", http.StatusServiceUnavailable, "starting", ""},
		{"metrics served", func() {}, "/metrics", http.StatusOK, "metrics", ""},
		{"healthy", func() { live.set(func() []string { return wedged }) }, "/healthz", http.StatusOK, "ok", ""},
		{"wedged", func() { wedged = []string{"configmaps.v1: publishing has made no progress for 2m0s"} }, "/healthz",
			http.StatusServiceUnavailable, "no progress", ""},
		{"ready with role", func() {
			ready.set(func() []string { return notReady })
			ready.setRole(func() string { return role })
		}, "/readyz", http.StatusOK, "ok: standby relay-1 (leader relay-0)", "not ready"},
		{"not ready with role and reason", func() { notReady = []string{"nats: RECONNECTING"} }, "/readyz",
			http.StatusServiceUnavailable, "standby relay-1 (leader relay-0)\nnot ready:\nnats: RECONNECTING", "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup()
			code, body := probe(t, addr, tt.path)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) || (tt.noBody != "" && strings.Contains(body, tt.noBody)) {
				t.Errorf("%s: got %d %q, want %d with %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

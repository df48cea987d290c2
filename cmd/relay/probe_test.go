package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

func TestProbeSucceedsOnlyOn2xx(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch r.URL.Path {
		case "/ready":
			io.WriteString(w, "ok\n")
		case "/later": // ready from the second attempt on
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "not ready: configmaps syncing\n")
				return
			}
			io.WriteString(w, "ok\n")
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready: NATS disconnected\n")
		}
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: success
	}{
		{name: "ready", args: []string{srv.URL + "/ready"}},
		{name: "not ready, one attempt", args: []string{srv.URL + "/never"}, wantErr: "HTTP 503: not ready: NATS disconnected"},
		{name: "ready on a later attempt", args: []string{"--timeout", "1m", srv.URL + "/later"}},
		{name: "nothing listening", args: []string{"http://127.0.0.1:1/readyz"}, wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			var stdout strings.Builder
			err := runProbe(context.Background(), tt.args, &stdout, io.Discard)
			if tt.wantErr == "" {
				if err != nil || stdout.String() != "ok\n" {
					t.Errorf("runProbe: got %v and %q, want success and the body", err, stdout.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.args[len(tt.args)-1]) {
				t.Errorf("runProbe: got error %v, want one naming the URL and %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseProbeRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		vars []string
	}{
		{name: "no URL", args: nil, vars: []string{"argument"}},
		{name: "two URLs", args: []string{"http://a/", "http://b/"}, vars: []string{"argument"}},
		{name: "not http", args: []string{"nats://a:4222"}, vars: []string{"URL"}},
		{name: "no host", args: []string{"http:///readyz"}, vars: []string{"URL"}},
		{name: "negative timeout", args: []string{"--timeout", "-1s", "http://a/"}, vars: []string{"--timeout"}},
		{name: "unknown flag", args: []string{"--retries", "3", "http://a/"}, vars: []string{"argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseProbe(tt.args, &stderr)
			checkFlagProblems(t, "parseProbe", err, stderr.String(), tt.vars)
		})
	}
}

// TestProbeIsASubcommand runs relay probe as helm test does: exit codes and messages.
func TestProbeIsASubcommand(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{name: "nothing listening", args: []string{"probe", "http://127.0.0.1:1/readyz"}, code: exitFailed, out: "probe http://127.0.0.1:1/readyz: not ready within 0s"},
		{name: "no URL", args: []string{"probe"}, code: exitConfig, out: "relay probe takes one URL"},
		{name: "listed in the help", args: []string{"--help"}, code: exitOK, out: "relay probe [--timeout D] URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := relaytest.Run(t, relayBin, nil, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) {
				t.Errorf("relay %s: got exit %d and %q, want %d and %q", strings.Join(tt.args, " "), code, out, tt.code, tt.out)
			}
		})
	}
}

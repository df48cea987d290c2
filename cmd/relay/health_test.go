package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

var healthAddrRe = regexp.MustCompile(`"addr":"([^"]+)","time":"[^"]+","message":"serving /healthz and /readyz"`)

// probe returns the status code and body of the relay's endpoint path.
func probe(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitProbe(t *testing.T, addr, path string, code int, contains string) {
	t.Helper()
	var got int
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, body = probe(t, addr, path)
		return got == code && strings.Contains(body, contains), nil
	})
	if err != nil {
		t.Fatalf("%s: got %d %q, want %d with %q", path, got, body, code, contains)
	}
}

func TestReadinessFollowsNATSAndSync(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	createNamespace(t, kubeClient(t), name)
	srv, err := testenv.StartNATS(ctx, env.TempDir(t), testenv.NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	vars := relayVars(name)
	vars["NATS_URL"] = srv.URL()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	waitOutput(t, r, "serving /healthz and /readyz")
	m := healthAddrRe.FindStringSubmatch(r.Output())
	if m == nil {
		t.Fatalf("no health address in the output:\n%s", r.Output())
	}
	addr := m[1]

	waitProbe(t, addr, "/readyz", http.StatusOK, "ok")
	waitProbe(t, addr, "/healthz", http.StatusOK, "ok")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, addr, "/readyz", http.StatusServiceUnavailable, "nats:")
	waitProbe(t, addr, "/healthz", http.StatusOK, "ok")
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitProbe(t, addr, "/readyz", http.StatusOK, "ok")
	r.stop(t)
}

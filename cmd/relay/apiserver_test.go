package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestUnreachableAPIServerIsReportedAtStartup points the relay at a closed port: within
// seconds it logs the connection error, /readyz names the apiserver problem next to
// "starting", and the metrics show the apiserver down with the failed discovery requests.
func TestUnreachableAPIServerIsReportedAtStartup(t *testing.T) {
	vars := relayVars(testName(t))
	vars["KUBECONFIG"] = kubeconfigVia(t, "https://"+closedAddr(t))
	vars["RELAY_RESOURCES"] = "configmaps"
	r := startRelay(t, vars)
	addr := healthAddr(t, r)

	waitOutput(t, r, `"phase":"discovery"`, "connection refused", "kubernetes apiserver request failed, retrying")
	waitProbe(t, addr, "/readyz", http.StatusServiceUnavailable, "kubernetes apiserver unreachable")
	_, body := probe(t, addr, "/readyz")
	if !strings.Contains(body, "starting") || !strings.Contains(body, "connection refused") {
		t.Errorf("/readyz: got %q, want starting and the connection error", body)
	}
	waitProbe(t, addr, "/metrics", http.StatusOK, "kube_nats_relay_apiserver_up 0")
	waitProbe(t, addr, "/metrics", http.StatusOK, `kube_nats_relay_apiserver_request_failures_total{phase="discovery",resource=""}`)
}

// TestDiscoveryErrorsAreLoggedAtStartup gives the relay a token the apiserver refuses: an
// answer, not an outage, but startup cannot go on, and every attempt is logged with the error.
func TestDiscoveryErrorsAreLoggedAtStartup(t *testing.T) {
	cfg, err := clientcmd.LoadFromFile(env.Kube.KubeconfigPath())
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	for _, u := range cfg.AuthInfos {
		u.Token, u.ClientCertificateData, u.ClientKeyData = "not-a-valid-token", nil, nil
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	vars := relayVars(testName(t))
	vars["KUBECONFIG"] = path
	vars["RELAY_RESOURCES"] = "configmaps"
	r := startRelay(t, vars)
	waitOutput(t, r, "apiserver discovery failed, retrying", `"attempt":1,"attempts":12`, "provide credentials")
}

// TestAPIServerOutageIsReportedWhileRunning cuts a running relay off from the apiserver twice:
// by a partition (connections cut, new ones closed at once, which client-go may retry by itself
// before its callers see anything) and by stopping the apiserver. Each time the failures are
// logged, /readyz and the metrics say the apiserver is unreachable, and all of it clears once
// the apiserver is back.
func TestAPIServerOutageIsReportedWhileRunning(t *testing.T) {
	name := testName(t)
	createNamespace(t, kubeClient(t), name)
	proxy := startPartitionProxy(t, strings.TrimPrefix(env.Kube.ServerURL(), "https://"))
	vars := relayVars(name)
	vars["KUBECONFIG"] = kubeconfigVia(t, "https://"+proxy.addr())
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	addr := healthAddr(t, r)
	waitProbe(t, addr, "/readyz", http.StatusOK, "ok")
	waitProbe(t, addr, "/metrics", http.StatusOK, "kube_nats_relay_apiserver_up 1")

	// The apiserver is shared with the other tests: it runs again whatever happens here.
	stopped := false
	startAPIServer := func() {
		if err := env.Kube.StartAPIServer(context.Background()); err != nil {
			t.Fatalf("start kube-apiserver: %v", err)
		}
		stopped = false
	}
	t.Cleanup(func() {
		if stopped {
			startAPIServer()
		}
	})
	outages := []struct {
		name      string
		cut, mend func()
	}{
		{"partition", proxy.partition, proxy.heal},
		{"apiserver stopped", func() {
			stopped = true
			if err := env.Kube.StopAPIServer(); err != nil {
				t.Fatalf("stop kube-apiserver: %v", err)
			}
		}, startAPIServer},
	}
	for i, o := range outages {
		t.Logf("outage %d: %s", i+1, o.name)
		o.cut()
		waitOutputCount(t, r, "kubernetes apiserver request failed, retrying", i+1)
		waitProbe(t, addr, "/readyz", http.StatusServiceUnavailable, "kubernetes apiserver unreachable")
		waitProbe(t, addr, "/metrics", http.StatusOK, "kube_nats_relay_apiserver_up 0")
		o.mend()
		waitOutputCount(t, r, "kubernetes apiserver reachable again", i+1)
		waitProbe(t, addr, "/readyz", http.StatusOK, "ok")
		waitProbe(t, addr, "/metrics", http.StatusOK, "kube_nats_relay_apiserver_up 1")
	}
	r.stop(t)
}

// TestStopWhileTheAPIServerIsUnreachableExitsZero stops a relay that is still retrying
// discovery against a closed port: SIGTERM is a requested shutdown, not a failure, so it
// exits 0 as it does once running, and without an error line.
func TestStopWhileTheAPIServerIsUnreachableExitsZero(t *testing.T) {
	vars := relayVars(testName(t))
	vars["KUBECONFIG"] = kubeconfigVia(t, "https://"+closedAddr(t))
	vars["RELAY_RESOURCES"] = "configmaps"
	r := startRelay(t, vars)
	waitOutput(t, r, "apiserver discovery failed, retrying", "connection refused")
	r.stop(t)
	if out := r.Output(); strings.Contains(out, "relay: context canceled") {
		t.Errorf("output after SIGTERM names an error:\n%s", out)
	}
}

// closedAddr returns a local address where nothing listens: connections are refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestDeniedIndexSegmentIsReportedOncePerSegment denies the relay's user the object index's
// segments: the refusal is a denial reported at once for the segment (not a publish that
// times out and is retried for ever), and the events themselves flow.
func TestDeniedIndexSegmentIsReportedOncePerSegment(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	cs := kubeClient(t)
	createNamespace(t, cs, name)
	vars := relayVars(name)
	bucket := vars["RELAY_INDEX_BUCKET"]
	if bucket == "" {
		t.Fatal("the test relay's variables name no RELAY_INDEX_BUCKET")
	}
	auth := testenv.NATSAuth{User: "relay", Password: "pw-" + rand.Text()}
	admin := testenv.NATSAuth{User: "admin", Password: "pw-" + rand.Text()}
	auth.ServerConfig = fmt.Sprintf(`authorization {
  users: [
    { user: relay, password: %q, permissions: { publish: { deny: [%q] } } }
    { user: admin, password: %q }
  ]
}
`, auth.Password, "$KV."+bucket+".*.s.>", admin.Password)
	srv := startAuthNATS(t, auth)
	for k, v := range authVars(auth) {
		vars[k] = v
	}
	vars["NATS_URL"] = srv.URL()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	addr := healthAddr(t, r)
	waitProbe(t, addr, "/readyz", http.StatusOK, "ok")
	js := authJSClient(t, srv.URL(), admin)

	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plan"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, addr, `kube_nats_relay_undeliverable_total{reason="denied",resource="configmaps",step="index"}`, 1)
	waitOutput(t, r, `"message":"index segment refused, its records given up`, `"reason":"denied"`, `"records":1`)
	waitFor(t, js, vars["RELAY_STREAM"], "the change's event", func(m []received) bool {
		return len(byObject(m)[name+"/plan"]) == 1
	})
}

package main

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// TestRelayKeepsStreamAndBucketsInItsJetStreamDomain runs the relay with RELAY_JS_DOMAIN and
// its embedded nats-server, which then runs in that domain, and a client of the domain finds
// the events and the checkpoint there. The embedded server answers its API with and without
// the domain prefix, so this proves the embedded server's domain, not that the relay's client
// uses $JS.<domain>.API: the fan-in test (a relay on a leaf with RELAY_JS_DOMAIN) and natsconn's
// TestJetStreamDomainPutsStreamAndBucketsOnTheLeaf prove that.
func TestRelayKeepsStreamAndBucketsInItsJetStreamDomain(t *testing.T) {
	ctx := context.Background()
	name, cms := testConfigMaps(t)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + relaytest.FreePort(t)
	vars := embeddedRelayVars(t, name, addr)
	vars["RELAY_JS_DOMAIN"] = "leaf-" + name
	r := startRelay(t, vars)
	nc := r.Connect(t, "nats://"+addr, nats.Timeout(natsAuthConnectTimeout))
	js, err := jetstream.NewWithDomain(nc, "leaf-"+name)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, js, vars["RELAY_STREAM"], "the initial sync in the domain", func(m []received) bool { return len(m) == 1 })
	if _, err := js.KeyValue(ctx, vars["RELAY_CHECKPOINT_BUCKET"]); err != nil {
		t.Errorf("checkpoint bucket %s in domain leaf-%s: %v", vars["RELAY_CHECKPOINT_BUCKET"], name, err)
	}
	// The domain's server answers the plain API too, for its own domain: the same stream.
	plain, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Stream(ctx, vars["RELAY_STREAM"]); errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s: not on the embedded server itself", vars["RELAY_STREAM"])
	}
	r.stop(t)
}

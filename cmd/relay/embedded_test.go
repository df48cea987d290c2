package main

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestEmbeddedNATSServerKeepsEventsAndCheckpointsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	cs := kubeClient(t)
	createNamespace(t, cs, name)
	cms := cs.CoreV1().ConfigMaps(name)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	vars := relayVars(name)
	delete(vars, "NATS_URL")
	vars["RELAY_NATS_LISTEN"] = addr
	vars["RELAY_NATS_DATA_DIR"] = t.TempDir()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name

	connect := func() jetstream.JetStream {
		t.Helper()
		var nc *nats.Conn
		deadline := time.Now().Add(time.Minute)
		for {
			nc, err = nats.Connect("nats://" + addr)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("connect to the embedded server at %s: %v", addr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return js
	}
	stream := vars["RELAY_STREAM"]
	subject := func(n string, typ event.Type) string {
		return fmt.Sprintf("kube.%s.core.v1.configmaps.%s.%s.%s", name, name, n, typ)
	}

	r := startRelay(t, vars)
	js := connect()
	waitFor(t, js, stream, "the initial sync", func(m []received) bool { return len(m) == 1 && m[0].subject == subject("first", event.Added) })
	r.stop(t)

	// While the relay (and with it the NATS server) is down.
	if err := cms.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	r = startRelay(t, vars)
	js = connect()
	msgs := waitFor(t, js, stream, "the delete made while stopped", func(m []received) bool { return len(m) >= 2 })
	r.stop(t)
	if len(msgs) != 2 || msgs[1].subject != subject("first", event.Deleted) || msgs[1].meta.Origin != event.Live {
		t.Fatalf("after restart on the same storage: got\n%s want the earlier ADDED and one live DELETED", describe(msgs))
	}
}

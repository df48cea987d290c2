package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

var bed relaytest.Bed

// TestMain starts a control plane and a nats-server for the package, and builds the relay
// for the tests that read what it really publishes.
func TestMain(m *testing.M) { bed.Main(m, testenv.Options{Kube: true, NATS: true}) }

// jsClient connects to the test bed's nats-server.
func jsClient(t *testing.T) jetstream.JetStream { return bed.JetStream(t) }

// testStream creates a stream of the test's own over kube.<cluster>.>, as the relay would,
// and returns its name and the cluster.
func testStream(t *testing.T, js jetstream.JetStream) (stream, cluster string) {
	t.Helper()
	cluster = relaytest.Name(t)
	stream = strings.ToUpper(cluster)
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name:     stream,
		Subjects: []string{event.StreamSubject("kube", cluster)},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		t.Fatalf("create stream %s: %v", stream, err)
	}
	return stream, cluster
}

// objectMeta returns the Meta of an added object i of resource in cluster's namespace "ns".
func objectMeta(cluster, resource, kind string, i int) event.Meta {
	return event.Meta{
		Cluster: cluster, Version: "v1", Resource: resource, Kind: kind,
		Namespace: "ns", Name: fmt.Sprintf("%s-%d", resource, i), UID: fmt.Sprintf("uid-%s-%d", resource, i),
		ResourceVersion: fmt.Sprint(100 + i), Type: event.Added, Origin: event.Live,
	}
}

// publish stores the event the relay would publish for m, and returns its stream sequence.
func publish(t *testing.T, js jetstream.JetStream, m event.Meta) uint64 {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":%q,"metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":%q}}`,
		m.Kind, m.Name, m.Namespace, m.UID, m.ResourceVersion)
	ack, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: m.Subject("kube").String(), Header: m.Header(), Data: []byte(body)})
	if err != nil {
		t.Fatalf("publish %s: %v", m.Name, err)
	}
	return ack.Sequence
}

// mirroringRelay is a relay of the test bed over resources in a namespace of the test's own,
// mirroring some of them into the bucket <name>-mirror.
type mirroringRelay struct {
	name string
	cs   kubernetes.Interface
	vars map[string]string
	js   jetstream.JetStream
	*relaytest.Process
}

// startMirroringRelay starts the relay over resources (as RELAY_RESOURCES) mirroring mirrored
// (as RELAY_MIRROR_RESOURCES) and waits until it watches each of the n resources.
func startMirroringRelay(t *testing.T, resources, mirrored string, n int) mirroringRelay {
	t.Helper()
	m := mirroringRelay{name: relaytest.Name(t), cs: bed.Kube(t)}
	relaytest.CreateNamespace(t, m.cs, m.name)
	m.vars = bed.Vars(m.name)
	m.vars["RELAY_RESOURCES"] = resources
	m.vars["RELAY_NAMESPACES"] = m.name
	m.vars["RELAY_MIRROR_RESOURCES"] = mirrored
	m.vars["RELAY_MIRROR_BUCKET"] = m.name + "-mirror"
	m.Process = bed.Start(t, m.vars)
	m.js = jsClient(t)
	m.WaitWatching(t, m.js, m.name, n)
	return m
}

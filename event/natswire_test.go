package event

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// wirePrefix is the subject prefix of the messages the wire tests publish; wireStream holds
// them, so that each publish goes the relay's way: a JetStream publish with a reply inbox,
// acknowledged once stored.
const (
	wirePrefix = "wire"
	wireStream = "WIRE"
	// wireWait bounds the wait for one message to come back from the local server: a
	// deadline for a failure, not a timing assertion.
	wireWait = 10 * time.Second
)

// wire is the real nats-server the wire tests publish through, started by the first test
// that needs it (the pure tests of this package need none) and stopped by TestMain.
var wire struct {
	once sync.Once
	err  error
	dir  string
	srv  *testenv.NATSServer
	nc   *nats.Conn
	js   jetstream.JetStream
}

func TestMain(m *testing.M) {
	code := m.Run()
	if wire.nc != nil {
		wire.nc.Close()
	}
	if wire.srv != nil {
		_ = wire.srv.Stop()
	}
	if wire.dir != "" {
		_ = os.RemoveAll(wire.dir)
	}
	os.Exit(code)
}

// wireJetStream returns the connection to the wire server, starting it on first use.
func wireJetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	wire.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if wire.dir, wire.err = os.MkdirTemp("", "event-wire-"); wire.err != nil {
			return
		}
		if wire.srv, wire.err = testenv.StartNATS(ctx, wire.dir, testenv.NATSOptions{}); wire.err != nil {
			return
		}
		if wire.nc, wire.err = nats.Connect(wire.srv.URL()); wire.err != nil {
			return
		}
		if wire.js, wire.err = jetstream.New(wire.nc); wire.err != nil {
			return
		}
		_, wire.err = wire.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: wireStream, Subjects: []string{wirePrefix + ".>"}, Storage: jetstream.MemoryStorage,
			MaxMsgs: 1000, Discard: jetstream.DiscardOld,
		})
	})
	if wire.err != nil {
		t.Fatalf("start the wire test nats-server: %v", wire.err)
	}
	return wire.nc, wire.js
}

// throughNATS publishes msg to JetStream as the relay does and returns the message as a
// subscriber of its subject receives it. It fails the test when the server refuses it or
// closes the connection (a control line over the server's limit does that).
func throughNATS(t testing.TB, msg *nats.Msg) *nats.Msg {
	t.Helper()
	nc, js := wireJetStream(t)
	sub, err := nc.SubscribeSync(msg.Subject)
	if err != nil {
		t.Fatalf("subscribe %q: %v", msg.Subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush subscription to %q: %v (connection %v)", msg.Subject, err, nc.Status())
	}
	ctx, cancel := context.WithTimeout(context.Background(), wireWait)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatalf("publish to %q (%d bytes): %v (connection %v)", msg.Subject, len(msg.Subject), err, nc.Status())
	}
	got, err := sub.NextMsg(wireWait)
	if err != nil {
		t.Fatalf("receive %q: %v", msg.Subject, err)
	}
	return got
}

// wireMeta is an event of the wire stream's prefix whose every field is set.
func wireMeta(i int) Meta {
	return Meta{
		Cluster: "prod", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings",
		Kind: "RoleBinding", Namespace: "default", Name: fmt.Sprintf("rb-%d", i),
		UID: "0b7e1c2a-0000-4000-8000-000000000001", ResourceVersion: "42", Type: Modified, Origin: Live,
		Time: time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC),
	}
}

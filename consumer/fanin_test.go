package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
)

// serverReady bounds a wait of waitFor: milliseconds usually, seconds on a busy machine.
const serverReady = natstest.Ready

// fanIn is a hub nats-server and one leaf nats-server per cluster, each leaf in its own
// JetStream domain named after its cluster, linked to the hub as leaf nodes: the topology of
// docs/operations.md, "Many clusters", in process.
type fanIn struct {
	hub    jetstream.JetStream
	hubNC  *nats.Conn
	leaves map[string]jetstream.JetStream // by cluster, connected to the leaf itself
}

// connect returns a JetStream context on s, in its own domain, and the connection.
func connect(t *testing.T, s *server.Server) (jetstream.JetStream, *nats.Conn) {
	t.Helper()
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, nc
}

// startFanIn starts a hub and a leaf per cluster (natstest.HubAndLeaves), linked, and creates
// on each leaf the cluster's stream as the relay would (event.DefaultStream over
// kube.<cluster>.>).
func startFanIn(t *testing.T, clusters ...string) *fanIn {
	t.Helper()
	hub, leaves := natstest.HubAndLeaves(t, clusters...)
	f := &fanIn{leaves: map[string]jetstream.JetStream{}}
	f.hub, f.hubNC = connect(t, hub)
	for _, c := range clusters {
		js, _ := connect(t, leaves[c])
		if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
			Name:     event.DefaultStream(c),
			Subjects: []string{event.StreamSubject("kube", c)},
			Storage:  jetstream.FileStorage,
		}); err != nil {
			t.Fatalf("create stream of %s: %v", c, err)
		}
		f.leaves[c] = js
	}
	return f
}

// waitFor polls cond until it holds, failing the test after serverReady.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(serverReady)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, serverReady)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not a wait for a result
	}
}

// waitStored waits until stream holds n messages.
func waitStored(t *testing.T, s jetstream.Stream, n uint64) {
	t.Helper()
	var got uint64
	waitFor(t, "stream "+s.CachedInfo().Config.Name+" holding the events", func() bool {
		info, err := s.Info(context.Background())
		if err != nil {
			return false
		}
		got = info.State.Msgs
		return got >= n
	})
	if got != n {
		t.Fatalf("stream %s: got %d messages, want %d", s.CachedInfo().Config.Name, got, n)
	}
}

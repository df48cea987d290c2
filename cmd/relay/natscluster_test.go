package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

func TestFaultNATSClusterNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("fault tests take minutes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The relay runs under the permissions docs/operations.md gives (the checker as the
	// administrator): a stream leader's failover must need no subject beyond them.
	f := newFaultEnv(t, "")
	conf, pw := permissionsConfig(t, permissionNames{Cluster: f.name, Stream: f.vars["RELAY_STREAM"],
		Checkpoints: f.vars["RELAY_CHECKPOINT_BUCKET"], Index: f.vars["RELAY_INDEX_BUCKET"], Namespace: f.name})
	cluster, err := testenv.StartNATSCluster(ctx, env.TempDir(t), 3, testenv.NATSOptions{Auth: conf})
	if err != nil {
		t.Fatalf("start nats cluster: %v", err)
	}
	t.Cleanup(cluster.Stop)
	t.Cleanup(func() { checkNoRelayViolations(t, cluster) })
	admin := make([]string, len(cluster.Nodes))
	for i, node := range cluster.Nodes {
		admin[i] = strings.Replace(node.URL(), "nats://", "nats://admin:"+pw["admin"]+"@", 1)
	}
	f.natsURL = strings.Join(admin, ",")
	f.vars["NATS_URL"] = cluster.URLs()
	f.vars["RELAY_NATS_USER"], f.vars["RELAY_NATS_PASSWORD"] = "relay", pw["relay"]
	f.vars["RELAY_STREAM_REPLICAS"] = "3"
	js := f.js()
	// Right after the cluster starts its meta leader may still be settling: wait until it
	// creates a replicated asset, which the relay's own creation then finds in place.
	stream := f.vars["RELAY_STREAM"]
	var lastErr error
	for deadline := time.Now().Add(time.Minute); ; {
		_, lastErr = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{event.StreamSubject("kube", f.name)},
			Replicas: 3, Duplicates: 10 * time.Minute, Storage: jetstream.FileStorage})
		if lastErr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("create the R3 stream: %v", lastErr)
	}

	_, n := f.strictScenario(
		loadSpec{Names: faultNames, Ops: 3000, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(1, 0.3, 0.5) },
		func(_ *loadGen, _ **relayProc, _ int) {
			// The relay created its buckets with the stream's replicas.
			for _, name := range []string{stream, "KV_" + f.name, "KV_" + f.name + "-index"} {
				s, err := js.Stream(ctx, name)
				if err != nil {
					t.Fatalf("stream %s: %v", name, err)
				}
				if r := s.CachedInfo().Config.Replicas; r != 3 {
					t.Errorf("%s: %d replicas, want 3", name, r)
				}
			}
			node := streamLeader(ctx, t, js, cluster, stream)
			if err := node.Kill(); err != nil {
				t.Fatalf("kill nats-server: %v", err)
			}
			t.Logf("killed the stream leader %s in the middle of the load; the cluster goes on with 2 of 3", node.URL())
		})
	if n != 1 {
		t.Fatalf("nodes killed: %d, want 1", n)
	}
}

// streamLeader returns the node leading the stream. testenv names its nodes nats-0, nats-1,
// ... in the order of cluster.Nodes.
func streamLeader(ctx context.Context, t *testing.T, js jetstream.JetStream, cluster *testenv.NATSCluster, stream string) *testenv.NATSServer {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info: %+v, %v", info, err)
	}
	names := make([]string, len(cluster.Nodes))
	for i := range cluster.Nodes {
		names[i] = fmt.Sprintf("nats-%d", i)
	}
	i := slices.IndexFunc(names, func(n string) bool { return strings.HasSuffix(info.Cluster.Leader, n) })
	if i < 0 {
		t.Fatalf("stream leader %q is none of %v", info.Cluster.Leader, names)
	}
	return cluster.Nodes[i]
}

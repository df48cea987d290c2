package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// The fan-in of issue 17 (docs/operations.md, "Many clusters"): two control planes, each with
// a relay publishing to a leaf nats-server in a JetStream domain of its own, and a hub whose
// aggregate stream sources both clusters' streams across domains.

const (
	// fanInCut is how long the issue keeps one leaf cut off from the hub, under load.
	fanInCut = 30 * time.Second
	// fanInRate and fanInOps make each cluster's load last about 50 s: the cut sits inside it
	// with writes before, during and after.
	fanInRate = 40
	fanInOps  = 2000
	// fanInNames keeps the topology small: enough objects for deletes and recreates to mix.
	fanInNames = 60
	// fanInAggregate is the hub's aggregate stream.
	fanInAggregate = "KUBE_ALL"
)

// fanInCluster is one cluster of the fan-in: a faultEnv (namespace, load, ground truth,
// checks) whose relay publishes to leaf as cluster.
func fanInCluster(t *testing.T, cluster string, cp *testenv.ControlPlane, leaf *testenv.NATSLeaf, seed uint64) *faultEnv {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := testName(t)
	createNamespace(t, cs, ns)
	vars := relayVars(ns)
	vars["KUBECONFIG"] = cp.KubeconfigPath()
	vars["NATS_URL"] = leaf.URL()
	vars["RELAY_NATS_USER"] = testenv.LeafRelayUser
	vars["RELAY_NATS_PASSWORD"] = leaf.RelayPassword
	vars["RELAY_CLUSTER"] = cluster
	vars["RELAY_STREAM"] = event.DefaultStream(cluster)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = ns
	vars["RELAY_LOG_LEVEL"] = "info"
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: cluster, Namespace: ns, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	return &faultEnv{t: t, name: ns, cs: cs, vars: vars, key: key, natsURL: leaf.URL(),
		natsOpts: leaf.ClientOptions(), seed: seed}
}

// ensureAggregate creates the hub's aggregate stream over the streams of clusters, each in the
// JetStream domain of its name, with the consumer package's helper a user would call.
func ensureAggregate(ctx context.Context, js jetstream.JetStream, name string, clusters ...string) error {
	a := consumer.Aggregate{Name: name}
	for _, c := range clusters {
		a.Sources = append(a.Sources, consumer.ClusterStream{Cluster: c, Domain: c})
	}
	_, err := consumer.EnsureAggregate(ctx, js, a)
	return err
}

// countBySubject returns how many messages of stream match filter.
func countBySubject(ctx context.Context, t *testing.T, js jetstream.JetStream, stream, filter string) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// waitStreamMsgs waits until stream holds want messages; it fails at once when it holds more.
func waitStreamMsgs(t *testing.T, js jetstream.JetStream, stream string, want uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got uint64
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false, nil
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false, nil
		}
		got = info.State.Msgs
		if got > want {
			return false, fmt.Errorf("%d messages, more than the %d expected", got, want)
		}
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("stream %s: %v (got %d messages, want %d)", stream, err, got, want)
	}
}

func TestFanInHubHoldsBothClustersOnceInOrderAfterALeafCut(t *testing.T) {
	if testing.Short() {
		t.Skip("the fan-in cuts a leaf off for 30 s")
	}
	ctx := context.Background()
	hub, err := testenv.StartNATSHub(ctx, env.TempDir(t), 1)
	if err != nil {
		t.Fatalf("start hub: %v", err)
	}
	t.Cleanup(hub.Stop)
	leaves := map[string]*testenv.NATSLeaf{}
	for _, c := range []string{"east", "west"} {
		l, err := testenv.StartNATSLeaf(ctx, env.TempDir(t), c, hub)
		if err != nil {
			t.Fatalf("start leaf %s: %v", c, err)
		}
		t.Cleanup(l.Stop)
		leaves[c] = l
	}
	// east is the package's control plane, west one of its own.
	westCP, err := testenv.StartControlPlane(ctx, env.TempDir(t), testenv.ControlPlaneOptions{})
	if err != nil {
		t.Fatalf("start west's control plane: %v", err)
	}
	t.Cleanup(westCP.Stop)
	seed := faultSeed(t)
	east := fanInCluster(t, "east", env.Kube, leaves["east"], seed)
	west := fanInCluster(t, "west", westCP, leaves["west"], seed+1)
	// west addresses its leaf's JetStream by domain, as a relay whose server is not its
	// stream's would: the stream, checkpoints and index then go through $JS.west.API.
	west.vars["RELAY_JS_DOMAIN"] = "west"
	clusters := []*faultEnv{east, west}

	truth := make([]*truthWatcher, len(clusters))
	relays := make([]*relayProc, len(clusters))
	for i, f := range clusters {
		truth[i] = startTruth(t, f.cs, f.name)
		relays[i] = f.startRelay()
		f.waitWatching()
	}
	nc, err := nats.Connect(hub.URLs(), append(hub.ClientOptions(), nats.MaxReconnects(-1))...)
	if err != nil {
		t.Fatalf("connect to the hub: %v", err)
	}
	t.Cleanup(nc.Close)
	hubJS, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureAggregate(ctx, hubJS, fanInAggregate, "east", "west"); err != nil {
		t.Fatalf("create the aggregate stream: %v", err)
	}

	spec := loadSpec{Names: fanInNames, Ops: fanInOps, Workers: faultWorkers, Rate: fanInRate, Duration: faultLoadBound}
	gens := []*loadGen{east.load(spec), west.load(spec)}
	westDone := make(chan error, 1)
	go func() {
		_, err := gens[1].run(ctx, nil, nil)
		westDone <- err
	}()
	eastLeafJS := east.js()
	var leafGrew, hubEastDuring, hubWestGrew uint64
	n, err := gens[0].run(ctx, gens[0].moments(1, 0.1, 0.2), func(int) {
		leaf := leaves["east"]
		leaf.Cut()
		if err := hub.WaitLeaf(ctx, leaf.Name(), false); err != nil {
			t.Fatal(err)
		}
		leafBefore := countBySubject(ctx, t, eastLeafJS, event.DefaultStream("east"), "kube.east.>")
		hubEast := countBySubject(ctx, t, hubJS, fanInAggregate, "kube.east.>")
		hubWest := countBySubject(ctx, t, hubJS, fanInAggregate, "kube.west.>")
		time.Sleep(fanInCut) // the cut itself
		leafGrew = countBySubject(ctx, t, eastLeafJS, event.DefaultStream("east"), "kube.east.>") - leafBefore
		hubEastDuring = countBySubject(ctx, t, hubJS, fanInAggregate, "kube.east.>") - hubEast
		hubWestGrew = countBySubject(ctx, t, hubJS, fanInAggregate, "kube.west.>") - hubWest
		leaf.Restore()
		if err := hub.WaitLeaf(ctx, leaf.Name(), true); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatalf("east's load: %v", err)
	}
	if err := <-westDone; err != nil {
		t.Fatalf("west's load: %v", err)
	}
	if n != 1 {
		t.Fatalf("cuts: got %d, want 1", n)
	}
	t.Logf("during the cut: east's leaf took %d events, the hub %d of east's and %d of west's",
		leafGrew, hubEastDuring, hubWestGrew)
	if leafGrew == 0 {
		t.Errorf("east's leaf took no event while cut off from the hub: the relay stalled")
	}
	if hubEastDuring != 0 {
		t.Errorf("the hub got %d of east's events while east was cut off: the cut was no cut", hubEastDuring)
	}
	if hubWestGrew == 0 {
		t.Errorf("the hub got none of west's events during east's cut")
	}
	for i, f := range clusters {
		f.requireRunning(relays[i])
		// Each relay talks to its leaf only: the cut never reached its connection.
		if out := relays[i].Output(); strings.Contains(out, "nats disconnected") {
			t.Errorf("%s's relay lost its NATS connection during the fan-in:\n%s", f.vars["RELAY_CLUSTER"], out)
		}
	}

	// Each cluster's leaf stream complete, then the hub holding both.
	leafMsgs := make([][]received, len(clusters))
	finals := make([]map[string]contract.Object, len(clusters))
	var total uint64
	for i, f := range clusters {
		leafMsgs[i], finals[i] = f.settle(gens[i], truth[i])
		total += uint64(len(leafMsgs[i]))
	}
	waitStreamMsgs(t, hubJS, fanInAggregate, total)
	agg := readStream(ctx, t, hubJS, fanInAggregate)
	t.Logf("aggregate: %s", contract.Stats(agg))
	byCluster := map[string][]received{}
	for _, m := range agg {
		// A consumer tells the clusters apart by the subject's cluster token and the header.
		token := strings.Split(m.Subject, ".")[1]
		if h := m.Header.Get(event.HeaderCluster); h != token {
			t.Errorf("%s: %s %q, want the subject's cluster %q", m.String(), event.HeaderCluster, h, token)
		}
		byCluster[token] = append(byCluster[token], m)
	}
	if len(byCluster) != len(clusters) {
		t.Errorf("aggregate: clusters %v, want east and west", sortedKeys(byCluster))
	}
	relaytest.Report(t, "aggregate: no duplicate ids", contract.NoDuplicateIDs(agg))
	for i, f := range clusters {
		cluster := f.vars["RELAY_CLUSTER"]
		msgs := byCluster[cluster]
		t.Run(cluster, func(t *testing.T) {
			// Exactly the leaf's stream, in its order: every event once.
			if d := sameEvents(msgs, leafMsgs[i]); d != "" {
				t.Errorf("the hub's %s events differ from %s's stream: %s", cluster, cluster, d)
			}
			// And the same checks as the fault tests, against the cluster's ground truth.
			changes, relists := truth[i].snapshot()
			if relists > 0 {
				t.Fatalf("the ground-truth watch lost history %d times (410): no strict check possible", relists)
			}
			g := *f
			g.t = t
			g.check(msgs, finals[i], changes, gens[i].uids())
		})
	}

	// A consumer on the hub bound to one cluster's events gets exactly those.
	cons, err := hubJS.OrderedConsumer(ctx, fanInAggregate, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{event.Filter{Prefix: "kube", Cluster: "west", AnyGroup: true}.String()}})
	if err != nil {
		t.Fatalf("consumer of west: %v", err)
	}
	for i := range byCluster["west"] {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("consumer of west: message %d of %d: %v", i+1, len(byCluster["west"]), err)
		}
		if c := m.Headers().Get(event.HeaderCluster); c != "west" {
			t.Fatalf("consumer of west: got %s of cluster %q", m.Subject(), c)
		}
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 {
		t.Errorf("consumer of west: %d messages beyond west's %d", info.NumPending, len(byCluster["west"]))
	}
	for i, f := range clusters {
		relays[i].stop(t)
		f.logRelays()
	}
}

// sameEvents describes how got differs from want, event ids compared in order; "" when they
// are the same.
func sameEvents(got, want []received) string {
	for i := range min(len(got), len(want)) {
		if g, w := got[i].Meta.ID(), want[i].Meta.ID(); g != w {
			return fmt.Sprintf("event %d: got %s, want %s", i, got[i].String(), want[i].String())
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d events, want %d", len(got), len(want))
	}
	return ""
}

package testenv

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startFanIn starts a hub of nodes servers and a leaf per domain, stopped when the test ends.
func startFanIn(t *testing.T, nodes int, domains ...string) (*NATSHub, map[string]*NATSLeaf) {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	hub, err := StartNATSHub(ctx, env.TempDir(t), nodes)
	if err != nil {
		t.Fatalf("start hub: %v", err)
	}
	t.Cleanup(hub.Stop)
	leaves := map[string]*NATSLeaf{}
	for _, d := range domains {
		l, err := StartNATSLeaf(ctx, env.TempDir(t), d, hub)
		if err != nil {
			t.Fatalf("start leaf %s: %v", d, err)
		}
		t.Cleanup(l.Stop)
		leaves[d] = l
	}
	return hub, leaves
}

func connectWith(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// waitMsgs waits until stream holds want messages, and fails if it ever holds more.
func waitMsgs(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, want uint64) {
	t.Helper()
	var got uint64
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			info, err := s.Info(ctx)
			if err == nil {
				got = info.State.Msgs
			}
		}
		if got > want {
			t.Fatalf("stream %s: got %d messages, want %d", stream, got, want)
		}
		if got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stream %s: got %d messages, want %d: %v", stream, got, want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestFanInHubSourcesEveryLeafAndCatchesUpAfterACut(t *testing.T) {
	for _, tc := range []struct {
		name string
		// nodes is the hub's size; the aggregate stream has as many replicas.
		nodes int
	}{
		{name: "one hub node", nodes: 1},
		{name: "three hub nodes", nodes: 3},
	} {
		t.Run(tc.name, func(t *testing.T) { testFanInCut(t, tc.nodes) })
	}
}

func testFanInCut(t *testing.T, nodes int) {
	ctx := testContext(t, 2*time.Minute)
	hub, leaves := startFanIn(t, nodes, "east", "west")
	streams := map[string]string{}
	leafJS := map[string]jetstream.JetStream{}
	for d, l := range leaves {
		streams[d] = "KUBE_" + d
		leafJS[d] = connectWith(t, l.URL(), l.ClientOptions()...)
		if _, err := leafJS[d].CreateStream(ctx, jetstream.StreamConfig{
			Name: streams[d], Subjects: []string{"kube." + d + ".>"}}); err != nil {
			t.Fatalf("create stream on leaf %s: %v", d, err)
		}
	}
	hubJS := connectWith(t, hub.URLs(), hub.ClientOptions()...)
	agg := AggregateStream("KUBE_ALL", streams)
	agg.Replicas = nodes
	if _, err := hubJS.CreateStream(ctx, agg); err != nil {
		t.Fatalf("create aggregate stream: %v", err)
	}
	publish := func(d string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := leafJS[d].Publish(ctx, fmt.Sprintf("kube.%s.obj%d", d, i), nil); err != nil {
				t.Fatalf("publish to leaf %s: %v", d, err)
			}
		}
	}
	publish("east", 0, 10)
	publish("west", 0, 10)
	waitMsgs(ctx, t, hubJS, "KUBE_ALL", 20)

	east := leaves["east"]
	east.Cut()
	if err := hub.WaitLeaf(ctx, east.Name(), false); err != nil {
		t.Fatal(err)
	}
	// The leaf keeps accepting while cut off; the other leaf's events still arrive.
	publish("east", 10, 25)
	publish("west", 10, 15)
	waitMsgs(ctx, t, leafJS["east"], "KUBE_east", 25)
	waitMsgs(ctx, t, hubJS, "KUBE_ALL", 25)
	// The leaf dials again once a second: after two refused attempts it is still cut off,
	// and reached the hub by no other way.
	for east.LinkRefused() < 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("the leaf dialled the hub through its link %d times while cut, want 2", east.LinkRefused())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if names, err := hub.Leaves(ctx); err != nil || slices.Contains(names, east.Name()) {
		t.Fatalf("hub's leaves while east is cut: got %v (err %v), want no %s", names, err, east.Name())
	}
	waitMsgs(ctx, t, hubJS, "KUBE_ALL", 25)

	east.Restore()
	if err := hub.WaitLeaf(ctx, east.Name(), true); err != nil {
		t.Fatal(err)
	}
	waitMsgs(ctx, t, hubJS, "KUBE_ALL", 40)
	// Every message of each leaf once, in the leaf's order.
	aggStream, err := hubJS.Stream(ctx, "KUBE_ALL")
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for seq := uint64(1); seq <= 40; seq++ {
		m, err := aggStream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("read aggregate message %d: %v", seq, err)
		}
		d := strings.Split(m.Subject, ".")[1]
		if want := fmt.Sprintf("kube.%s.obj%d", d, next[d]); m.Subject != want {
			t.Fatalf("aggregate: got %s, want %s", m.Subject, want)
		}
		next[d]++
	}
	if next["east"] != 25 || next["west"] != 15 {
		t.Errorf("aggregate: got %v messages per leaf, want east 25, west 15", next)
	}
}

func TestFanInLeavesKeepAcceptingWhileTheHubIsDownAndTheHubCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("the hub's sources retry with a back-off: catching up takes about 40 s")
	}
	ctx := testContext(t, 3*time.Minute)
	hub, leaves := startFanIn(t, 1, "east")
	east := leaves["east"]
	leafJS := connectWith(t, east.URL(), east.ClientOptions()...)
	if _, err := leafJS.CreateStream(ctx, jetstream.StreamConfig{Name: "KUBE_east", Subjects: []string{"kube.east.>"}}); err != nil {
		t.Fatal(err)
	}
	hubJS := connectWith(t, hub.URLs(), hub.ClientOptions()...)
	if _, err := hubJS.CreateStream(ctx, AggregateStream("KUBE_ALL", map[string]string{"east": "KUBE_east"})); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := leafJS.Publish(ctx, fmt.Sprintf("kube.east.obj%d", i), nil); err != nil {
				t.Fatalf("publish %d to the leaf: %v", i, err)
			}
		}
	}
	publish(0, 10)
	waitMsgs(ctx, t, hubJS, "KUBE_ALL", 10)
	if err := hub.Nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	// The leaf acknowledges every publish with the hub gone.
	publish(10, 30)
	if err := hub.Nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := hub.WaitLeaf(ctx, east.Name(), true); err != nil {
		t.Fatal(err)
	}
	waitMsgs(ctx, t, hubJS, "KUBE_ALL", 30)
	// Informative: the hub's first source attempts fail before the leaf is back, and its
	// retries back off (10 s, 20 s, ... up to 2 minutes).
	t.Logf("the hub caught up %s after its restart", time.Since(start).Round(time.Second))
	agg, err := hubJS.Stream(ctx, "KUBE_ALL")
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 30; seq++ {
		m, err := agg.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("aggregate message %d: %v", seq, err)
		}
		if want := fmt.Sprintf("kube.east.obj%d", seq-1); m.Subject != want {
			t.Fatalf("aggregate message %d: got %s, want %s", seq, m.Subject, want)
		}
	}
}

// The documentation shows the configuration these servers run with.
func TestFanInConfigurationIsTheDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, conf := range map[string]string{
		"hub":  HubConfig("0.0.0.0:7422"),
		"leaf": LeafConfig([]string{"nats-leaf://leaf:LEAF_PASSWORD@hub.example.com:7422"}),
	} {
		if !strings.Contains(string(doc), conf) {
			t.Errorf("docs/operations.md lacks the %s configuration:\n%s", name, conf)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// faultEnv is one scenario's namespace, relay configuration and tools.
type faultEnv struct {
	t       *testing.T
	name    string
	cs      kubernetes.Interface
	vars    map[string]string
	key     string
	natsURL string
	seed    uint64
	relays  []*relayProc

	// natsOpts authenticate js's connection to natsURL, when the server wants it.
	natsOpts []nats.Option
}

func newFaultEnv(t *testing.T, natsURL string) *faultEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("fault tests take minutes")
	}
	name, cs := testNamespace(t)
	vars := relayVars(name)
	vars["NATS_URL"] = natsURL
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	// Per-event debug lines of thousands of changes times a dozen restarts would drown a
	// failure's output; lifecycle, retries and relists are logged at info and warn.
	vars["RELAY_LOG_LEVEL"] = "info"
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	return &faultEnv{t: t, name: name, cs: cs, vars: vars, key: key, natsURL: natsURL, seed: faultSeed(t)}
}

// ownNATS starts a nats-server for one test, to kill and restart at will.
func ownNATS(t *testing.T, opts testenv.NATSOptions) *testenv.NATSServer {
	t.Helper()
	s, err := testenv.StartNATS(context.Background(), env.TempDir(t), opts)
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// js connects a consumer to the scenario's NATS; it reconnects forever, like the relay.
func (f *faultEnv) js() jetstream.JetStream {
	f.t.Helper()
	opts := append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, f.natsOpts...)
	nc, err := nats.Connect(f.natsURL, opts...)
	if err != nil {
		f.t.Fatalf("connect to %s: %v", f.natsURL, err)
	}
	f.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		f.t.Fatal(err)
	}
	return js
}

// startRelay starts a relay with the scenario's variables and remembers it for the summary.
func (f *faultEnv) startRelay() *relayProc {
	f.t.Helper()
	r := startRelay(f.t, f.vars)
	f.relays = append(f.relays, r)
	return r
}

// waitWatching waits for the relay's first checkpoint: its initial list is done and it
// watches, so that every later change reaches it live.
func (f *faultEnv) waitWatching() {
	f.t.Helper()
	waitCheckpoint(f.t, f.js(), f.name, f.key, func(string) bool { return true })
}

func (f *faultEnv) load(cfg loadSpec) *loadGen {
	cfg.Namespace = f.name
	return newLoadGen(f.t, f.cs, f.seed, cfg)
}

// settle writes the fence, lists the namespace, waits until the ground truth (if any) and the
// relay have everything, and returns the whole stream and the cluster's final state.
//
// The relay is done when its checkpoint reaches the fence's resourceVersion, the namespace's
// last change: the checkpoint passes a change only once it and all before it are acked. The
// final List's resourceVersion is at least the fence's, with no change of the namespace in
// between; waiting for the checkpoint to reach the List's own resourceVersion instead would
// wait for a bookmark (about a minute), since only this namespace's events move it.
func (f *faultEnv) settle(g *loadGen, tw *truthWatcher) ([]received, map[string]contract.Object) {
	f.t.Helper()
	ctx := context.Background()
	if err := g.createWith(ctx, fenceName, nil, false); err != nil {
		f.t.Fatalf("fence: %v", err)
	}
	fence := g.state()[f.name+"/"+fenceName].RV
	final := f.list(ctx)
	if d := stateDiff(g.state(), final); d != "" {
		f.t.Errorf("the generator's log disagrees with the cluster: %s", d)
	}
	if tw != nil {
		tw.waitCaughtUp(f.t, final)
	}
	start := time.Now()
	js := f.js()
	waitCheckpoint(f.t, js, f.name, f.key, func(rv string) bool { return rvInt(f.t, rv) >= rvInt(f.t, fence) })
	msgs := readStream(ctx, f.t, js, f.vars["RELAY_STREAM"])
	f.t.Logf("relay caught up with the fence (rv %s) %s after it was written; stream: %s",
		fence, time.Since(start).Round(time.Millisecond), contract.Stats(msgs))
	return msgs, final
}

// list returns the namespace's objects, retrying while the apiserver is not ready.
func (f *faultEnv) list(ctx context.Context) map[string]contract.Object {
	f.t.Helper()
	var out map[string]contract.Object
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := f.cs.CoreV1().ConfigMaps(f.name).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		out = make(map[string]contract.Object, len(l.Items))
		for _, cm := range l.Items {
			out[cm.Namespace+"/"+cm.Name] = contract.Object{UID: string(cm.UID), RV: cm.ResourceVersion}
		}
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("list %s: %v (last error %v)", f.name, err, last)
	}
	return out
}

// check runs the checker. truth nil means no uninterrupted ground truth exists (a 410 in the
// scenario): nothing-missing is then left out and the final state is what counts.
func (f *faultEnv) check(msgs []received, final map[string]contract.Object, truth []contract.Change, uids map[string]bool) {
	f.t.Helper()
	relaytest.Report(f.t, "envelope", contract.Envelope(msgs, "kube"))
	relaytest.Report(f.t, "1 no duplicate ids", contract.NoDuplicateIDs(msgs))
	relaytest.Report(f.t, "2 per-uid order", contract.PerUIDOrder(contract.Ordinary(msgs)))
	relaytest.Report(f.t, "derived events", contract.Derived(msgs))
	if truth != nil {
		relaytest.Report(f.t, "3 nothing missing", contract.NothingMissing(msgs, truth))
	}
	relaytest.Report(f.t, "4 final state", contract.FinalState(msgs, final))
	relaytest.Report(f.t, "5 inferred deletes", contract.InferredDeletes(msgs))
	relaytest.Report(f.t, "known uids", contract.KnownUIDs(msgs, uids))
}

// requireRunning fails when the relay exited on its own.
func (f *faultEnv) requireRunning(r *relayProc) {
	f.t.Helper()
	select {
	case <-r.Done():
		f.t.Fatalf("relay exited on its own: %v\n%s", r.Err(), r.Output())
	default:
	}
}

// logRelays summarises what the relays said, for the report.
func (f *faultEnv) logRelays() {
	f.t.Helper()
	count := map[string]int{}
	phrases := []string{"resuming from checkpoint", "resourceVersion expired, relisting", "listed", "watching",
		"publish failed, retrying", "list or watch failed, retrying", "nats disconnected", "max payload"}
	for _, r := range f.relays {
		out := r.Output()
		for _, p := range phrases {
			count[p] += strings.Count(out, p)
		}
	}
	var parts []string
	for _, p := range phrases {
		parts = append(parts, fmt.Sprintf("%q x%d", p, count[p]))
	}
	f.t.Logf("relay logs (%d processes): %s", len(f.relays), strings.Join(parts, ", "))
	if os.Getenv(relayLogsEnv) == "1" && !f.t.Failed() { // on failure startRelay prints them
		for i, r := range f.relays {
			f.t.Logf("relay %d output:\n%s", i, r.Output())
		}
	}
}

// strictScenario runs a load over a relay, calls fault(g, &r, i) from the test goroutine at
// the i-th of the moments (it may replace the relay), and checks the stream against an
// uninterrupted ground truth.
func (f *faultEnv) strictScenario(cfg loadSpec, moments func(g *loadGen) []int,
	fault func(g *loadGen, r **relayProc, i int)) (msgs []received, faults int) {
	f.t.Helper()
	tw := startTruth(f.t, f.cs, f.name)
	r := f.startRelay()
	f.waitWatching()
	g := f.load(cfg)
	faults, err := g.run(context.Background(), moments(g), func(i int) { fault(g, &r, i) })
	if err != nil {
		f.t.Fatalf("load: %v", err)
	}
	f.requireRunning(r)
	msgs = f.checkTruth(g, tw)
	r.stop(f.t)
	return msgs, faults
}

// checkTruth waits for the stream to settle after g's load and checks it against the
// uninterrupted ground truth tw; it returns the stream's messages.
func (f *faultEnv) checkTruth(g *loadGen, tw *truthWatcher) []received {
	f.t.Helper()
	msgs, final := f.settle(g, tw)
	truth, relists := tw.snapshot()
	if relists > 0 {
		f.t.Fatalf("the ground-truth watch lost history %d times (410): no strict check possible", relists)
	}
	f.t.Logf("ground truth: %d changes", len(truth))
	f.check(msgs, final, truth, g.uids())
	f.logRelays()
	return msgs
}

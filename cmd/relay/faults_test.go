package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// The fault tests of issue 4: a seeded load of creates, updates, deletes and
// delete-and-recreates over a namespace of their own, a fault injected at random moments, and a
// checker (checker_test.go) comparing the whole stream with ground truth. Each scenario has its
// own namespace, cluster name, stream and bucket. FAULT_SEED replays a run's choices.

const (
	// faultNames and faultOps are the floor: at least 5,000 changes over at least
	// 100 objects.
	faultNames = 120
	faultOps   = 5000
	// faultWorkers write in parallel, each over its own names.
	faultWorkers = 4
	// faultRate paces the load so that it lasts about half a minute whatever the machine:
	// long enough for a dozen relay restarts to land in the middle of it, and well inside the
	// apiserver watch cache's 75 s of history, so that resuming never meets a 410.
	faultRate = 150
	// faultLoadBound stops a load that runs far slower than planned.
	faultLoadBound = 4 * time.Minute
	// relayLogsEnv, set to 1, prints every relay's output even when the test passes.
	relayLogsEnv = "FAULT_RELAY_LOGS"
	// fenceName is the object written last: its resourceVersion marks "everything is in".
	fenceName = "zz-fence"
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
}

func newFaultEnv(t *testing.T, natsURL string) *faultEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("fault tests take minutes")
	}
	name := testName(t)
	cs := kubeClient(t)
	createNamespace(t, cs, name)
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
	nc, err := nats.Connect(f.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
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
func (f *faultEnv) settle(g *loadGen, tw *truthWatcher) ([]received, map[string]objectState) {
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
		fence, time.Since(start).Round(time.Millisecond), streamStats(msgs))
	return msgs, final
}

// list returns the namespace's objects, retrying while the apiserver is not ready.
func (f *faultEnv) list(ctx context.Context) map[string]objectState {
	f.t.Helper()
	var out map[string]objectState
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := f.cs.CoreV1().ConfigMaps(f.name).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		out = make(map[string]objectState, len(l.Items))
		for _, cm := range l.Items {
			out[cm.Namespace+"/"+cm.Name] = objectState{UID: string(cm.UID), RV: cm.ResourceVersion}
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
func (f *faultEnv) check(msgs []received, final map[string]objectState, truth []truthChange, uids map[string]bool) {
	f.t.Helper()
	report(f.t, "envelope", checkEnvelope(msgs, "kube"))
	report(f.t, "1 no duplicate ids", checkNoDuplicateIDs(msgs))
	report(f.t, "2 per-uid order", checkPerUIDOrder(msgs))
	if truth != nil {
		report(f.t, "3 nothing missing", checkNothingMissing(msgs, truth))
	}
	report(f.t, "4 final state", checkFinalState(msgs, final))
	report(f.t, "5 inferred deletes", checkInferredDeletes(msgs))
	report(f.t, "known uids", checkKnownUIDs(msgs, uids))
}

// requireRunning fails when the relay exited on its own.
func (f *faultEnv) requireRunning(r *relayProc) {
	f.t.Helper()
	select {
	case <-r.done:
		f.t.Fatalf("relay exited on its own: %v\n%s", r.err, r.out.String())
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
		out := r.out.String()
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
			f.t.Logf("relay %d output:\n%s", i, r.out.String())
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
	msgs, final := f.settle(g, tw)
	truth, relists := tw.snapshot()
	if relists > 0 {
		f.t.Fatalf("the ground-truth watch lost history %d times (410): no strict check possible", relists)
	}
	f.t.Logf("ground truth: %d changes", len(truth))
	f.check(msgs, final, truth, g.uids())
	f.logRelays()
	r.stop(f.t)
	return msgs, faults
}

func TestFaultRelayKilledRepeatedly(t *testing.T) {
	f := newFaultEnv(t, env.NATS.URL())
	const kills = 12
	_, n := f.strictScenario(
		loadSpec{Names: faultNames, Ops: faultOps, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(kills, 0.03, 0.9) },
		func(_ *loadGen, r **relayProc, i int) {
			// SIGKILL, as a crash: no drain, no final checkpoint. Started again at once.
			if err := (*r).cmd.Process.Kill(); err != nil {
				t.Fatalf("kill relay: %v", err)
			}
			<-(*r).done
			*r = f.startRelay()
		})
	t.Logf("relay killed %d times", n)
	if n < 10 {
		t.Errorf("relay killed %d times, want at least 10", n)
	}
}

func TestFaultNATSServerKilled(t *testing.T) {
	ns := ownNATS(t, testenv.NATSOptions{})
	f := newFaultEnv(t, ns.URL())
	rng := rand.New(rand.NewPCG(f.seed, 99))
	_, n := f.strictScenario(
		loadSpec{Names: faultNames, Ops: faultOps, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(2+g.rng.IntN(2), 0.15, 0.85) },
		func(_ *loadGen, _ **relayProc, i int) {
			if err := ns.Kill(); err != nil {
				t.Fatalf("kill nats-server: %v", err)
			}
			// The pause is the outage being injected, not a wait for a condition.
			pause := 200*time.Millisecond + time.Duration(rng.Int64N(int64(2800*time.Millisecond)))
			time.Sleep(pause)
			start := time.Now()
			if err := ns.Start(context.Background()); err != nil {
				t.Fatalf("restart nats-server: %v", err)
			}
			t.Logf("nats-server killed, down %s, healthy again after %s", pause.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	if n < 2 {
		t.Errorf("nats-server killed %d times, want at least 2", n)
	}
}

func TestFaultNATSDown30s(t *testing.T) {
	const outage = 30 * time.Second
	ns := ownNATS(t, testenv.NATSOptions{})
	f := newFaultEnv(t, ns.URL())
	// A small buffer fills within a second of load: intake must pause (and may lose its watch
	// and resume) while NATS is gone.
	f.vars["RELAY_BUFFER_SIZE"] = "64"
	var during int64
	_, n := f.strictScenario(
		// 50 writes a second for about 50 s: the outage sits in the middle with the load going on.
		loadSpec{Names: faultNames, Ops: 2500, Workers: faultWorkers, Rate: 50, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(1, 0.1, 0.2) },
		func(g *loadGen, _ **relayProc, i int) {
			if err := ns.Kill(); err != nil {
				t.Fatalf("stop nats-server: %v", err)
			}
			before, done := time.Now(), g.done.Load()
			time.Sleep(outage) // the outage itself
			during = g.done.Load() - done
			if err := ns.Start(context.Background()); err != nil {
				t.Fatalf("restart nats-server: %v", err)
			}
			t.Logf("nats-server down for %s", time.Since(before).Round(time.Millisecond))
		})
	if n != 1 {
		t.Fatalf("outages: %d, want 1", n)
	}
	t.Logf("%d writes while NATS was down", during)
	if during < 64 {
		t.Errorf("only %d writes while NATS was down: the buffer of 64 never filled", during)
	}
}

func TestFaultAPIServerRestarted(t *testing.T) {
	f := newFaultEnv(t, env.NATS.URL())
	// No uninterrupted ground truth exists here: after the restart the apiserver's watch
	// cache starts empty, so every watch from before it meets 410, ours included. The checks
	// are the cluster's final state (a List at the end), the generator's log (what it really
	// wrote, retries resolved) and the properties that hold whatever was compacted away:
	// unique ids, per-object order, marked inferred deletes.
	//
	// Two restarts. In the first the relay reconnects as it will. It relists (410), but the
	// relist has nothing to diff: nobody can write while the apiserver is down, and the
	// restarted watch cache starts at about the revision the relay last saw. In the second the
	// relay is cut off from the apiserver (a network partition, through partitionProxy) while
	// writes go on, then the apiserver restarts, more writes follow, and the partition heals:
	// the relay's resume meets 410 with deletes, recreates and updates to infer, which the
	// checks then require to have been published.
	proxy := startPartitionProxy(t, strings.TrimPrefix(env.Kube.ServerURL(), "https://"))
	f.vars["KUBECONFIG"] = kubeconfigVia(t, "https://"+proxy.addr())
	r := f.startRelay()
	f.waitWatching()
	g := f.load(loadSpec{Names: faultNames, Ops: 4000, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound})
	moments := append(g.moments(1, 0.2, 0.35), g.moments(1, 0.5, 0.6)...)
	waitWrites := func(n int64) {
		t.Helper()
		_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return g.done.Load() >= n, nil
		})
	}
	n, err := g.run(context.Background(), moments, func(i int) {
		partitioned := i == 1
		if partitioned {
			proxy.partition()
			from := g.done.Load()
			waitWrites(from + 100 + g.rng.Int64N(200))
			t.Logf("relay cut off from the apiserver during %d writes", g.done.Load()-from)
		}
		start, at := time.Now(), g.done.Load()
		if err := env.Kube.RestartAPIServer(context.Background()); err != nil {
			t.Fatalf("restart kube-apiserver: %v", err)
		}
		t.Logf("kube-apiserver restarted in %s (at %d writes, relay cut off: %v)", time.Since(start).Round(time.Millisecond), at, partitioned)
		if partitioned {
			ready := g.done.Load()
			waitWrites(ready + 100 + g.rng.Int64N(200))
			proxy.heal()
			t.Logf("partition healed after %d writes since the apiserver was ready", g.done.Load()-ready)
		}
	})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if n != 2 {
		t.Fatalf("apiserver restarts: %d, want 2", n)
	}
	f.requireRunning(r)
	msgs, final := f.settle(g, nil)
	f.check(msgs, final, nil, g.uids())
	published := make(map[string]bool)
	relisted, inferred := 0, 0
	for _, m := range msgs {
		published[m.meta.UID] = true
		if m.meta.Origin == event.Relist {
			relisted++
		}
		if inferredDelete(m) {
			inferred++
		}
	}
	unseen := 0
	for uid := range g.uids() {
		if !published[uid] {
			unseen++
		}
	}
	// Objects created and deleted while nobody could watch are legitimately never seen.
	t.Logf("%d of %d created objects never appeared in the stream (lived only while the history was lost)", unseen, len(g.uids()))
	if relisted == 0 || inferred == 0 {
		t.Errorf("after the partitioned restart: %d relist events, %d inferred deletes; want some of each (did the relay relist?)", relisted, inferred)
	}
	f.logRelays()
	r.stop(t)
}

func TestFaultExpiredHistoryWhileStopped(t *testing.T) {
	ctx := context.Background()
	f := newFaultEnv(t, env.NATS.URL())
	// The smallest duplicate window: whatever the relay re-publishes shows in the stream, so
	// "nothing for unchanged objects" is the relay's doing, not JetStream's.
	f.vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	r := f.startRelay()
	f.waitWatching()
	g := f.load(loadSpec{Names: faultNames, Workers: 1})
	rng := g.rng
	names := make([]string, faultNames)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%03d", i)
		if err := g.create(ctx, names[i], rng); err != nil {
			t.Fatal(err)
		}
	}
	for range faultNames {
		if err := g.update(ctx, names[rng.IntN(len(names))], rng); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.createWith(ctx, "zz-before", nil, false); err != nil {
		t.Fatal(err)
	}
	live := g.state()
	waitCheckpoint(t, f.js(), f.name, f.key, func(rv string) bool { return rvInt(t, rv) >= rvInt(t, live[f.name+"/zz-before"].RV) })
	r.stop(t)
	before := readStream(ctx, t, f.js(), f.vars["RELAY_STREAM"])
	report(t, "published before the stop", checkFinalState(before, live))

	// While the relay is stopped: deletes, recreates (some updated after), updates (some
	// several times), updates then deletes, new objects, objects created and deleted again;
	// the rest stay as they are.
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	plan := []struct {
		what  string
		n     int
		steps string // c create, u update, d delete
	}{
		{"deleted", 20, "d"},
		{"recreated", 12, "dc"},
		{"recreated and updated", 6, "dcu"},
		{"updated", 15, "u"},
		{"updated three times", 10, "uuu"},
		{"updated then deleted", 10, "ud"},
	}
	do := func(name, steps string) {
		for _, s := range steps {
			var err error
			switch s {
			case 'c':
				err = g.create(ctx, name, rng)
			case 'u':
				err = g.update(ctx, name, rng)
			case 'd':
				err = g.delete(ctx, name)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	i := 0
	var done []string
	for _, p := range plan {
		for range p.n {
			do(names[i], p.steps)
			i++
		}
		done = append(done, fmt.Sprintf("%d %s", p.n, p.what))
	}
	t.Logf("while stopped: %s, %d unchanged, 8 new, 5 created and deleted", strings.Join(done, ", "), len(names)-i)
	for k := range 8 {
		do(fmt.Sprintf("new-%d", k), "cu")
	}
	for k := range 5 {
		do(fmt.Sprintf("ephemeral-%d", k), "cud")
	}
	rev, err := env.Kube.ExpireHistory(ctx)
	if err != nil {
		t.Fatalf("expire history: %v", err)
	}
	t.Logf("etcd compacted at revision %d and kube-apiserver restarted", rev)

	r = f.startRelay()
	msgs, final := f.settle(g, nil)
	f.requireRunning(r)
	// final includes the fence, written after the history expired: it may come live or by the
	// relist, either is right, and its checks are the common ones.
	delete(final, f.name+"/"+fenceName)
	after := msgs[len(before):]
	var fence []received
	rest := after[:0:0]
	for _, m := range after {
		if m.meta.Name == fenceName {
			fence = append(fence, m)
		} else {
			rest = append(rest, m)
		}
	}
	report(t, "relist diff", checkRelistDiff(rest, live, final))
	final[f.name+"/"+fenceName] = g.state()[f.name+"/"+fenceName]
	if want := final[f.name+"/"+fenceName]; len(fence) != 1 || fence[0].meta.Type != event.Added ||
		fence[0].meta.UID != want.UID || fence[0].meta.ResourceVersion != want.RV {
		t.Errorf("fence: got\n%swant one added uid=%s rv=%s", describe(fence), want.UID, want.RV)
	}
	f.check(msgs, final, nil, g.uids())
	f.logRelays()
	r.stop(t)
}

func TestFaultOversizeObject(t *testing.T) {
	const maxPayload = 64 << 10
	ns := ownNATS(t, testenv.NATSOptions{MaxPayload: maxPayload})
	f := newFaultEnv(t, ns.URL())
	ctx := context.Background()
	const bigName = "big-0"
	// The big object's life, written in the middle of the load: each step's state is big
	// (over max_payload) or small. A delete's event carries the last state, big here.
	steps := []struct {
		op  opKind
		big bool
	}{
		{opCreate, true}, {opUpdate, false}, {opUpdate, true}, {opUpdate, false},
		{opUpdate, true}, {opDelete, true}, {opCreate, false},
	}
	bigData := func() map[string]string {
		b := make([]byte, 100<<10)
		for i := range b {
			b[i] = byte('a' + rand.IntN(26))
		}
		return map[string]string{"blob": string(b)}
	}
	msgs, _ := f.strictScenario(
		loadSpec{Names: 40, Ops: 1200, Workers: faultWorkers, Rate: 100, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(1, 0.4, 0.6) },
		func(g *loadGen, _ **relayProc, _ int) {
			for _, s := range steps {
				data := map[string]string{"small": "yes"}
				if s.big {
					data = bigData()
				}
				var err error
				switch s.op {
				case opCreate:
					err = g.createWith(ctx, bigName, data, s.big)
				case opUpdate:
					err = g.updateWith(ctx, bigName, data, s.big)
				case opDelete:
					err = g.delete(ctx, bigName)
				}
				if err != nil {
					t.Fatalf("%s %s: %v", s.op, bigName, err)
				}
			}
		})
	var mine []received
	firstBig := -1
	for i, m := range msgs {
		if m.meta.Name == bigName {
			if firstBig < 0 {
				firstBig = i
			}
			mine = append(mine, m)
		}
	}
	if len(mine) != len(steps) {
		t.Fatalf("%s: got %d events, want %d:\n%s", bigName, len(mine), len(steps), describe(mine))
	}
	for i, m := range mine {
		omitted := m.header.Get(event.HeaderBodyOmitted)
		switch {
		case steps[i].big && (omitted != event.BodyOmittedOversize || m.body != nil):
			t.Errorf("%s step %d (%s, big): %s=%q, body %v; want %q and no body", bigName, i, steps[i].op, event.HeaderBodyOmitted, omitted, m.body != nil, event.BodyOmittedOversize)
		case !steps[i].big && (omitted != "" || m.body == nil):
			t.Errorf("%s step %d (%s, small): %s=%q, body %v; want a body", bigName, i, steps[i].op, event.HeaderBodyOmitted, omitted, m.body != nil)
		}
		if i > 0 && rvInt(t, m.meta.ResourceVersion) <= rvInt(t, mine[i-1].meta.ResourceVersion) {
			t.Errorf("%s: %s not after %s", bigName, msgString(m), msgString(mine[i-1]))
		}
	}
	// The stream went on past the reference-only event: later changes of other objects follow it.
	later := 0
	bigRV := rvInt(t, msgs[firstBig].meta.ResourceVersion)
	for _, m := range msgs[firstBig+1:] {
		if m.meta.Name != bigName && rvInt(t, m.meta.ResourceVersion) > bigRV {
			later++
		}
	}
	t.Logf("%d later changes of other objects follow the first oversize event", later)
	if later == 0 {
		t.Errorf("no change of another object follows the oversize event: the stream stopped")
	}
}

// partitionProxy forwards TCP connections to an address until partitioned: then it cuts every
// connection it carries and closes new ones at once, until healed. Between the relay and the
// apiserver it is a network partition that leaves the rest of the test bed alone.
type partitionProxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func startPartitionProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &partitionProxy{l: l, target: target, conns: make(map[net.Conn]struct{})}
	go p.serve()
	t.Cleanup(func() { l.Close(); p.partition() })
	return p
}

func (p *partitionProxy) addr() string { return p.l.Addr().String() }

func (p *partitionProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *partitionProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// partition cuts every connection and refuses new ones.
func (p *partitionProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// heal lets new connections through again.
func (p *partitionProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// kubeconfigVia writes a copy of the test bed's kubeconfig that reaches the apiserver at
// server, and returns its path.
func kubeconfigVia(t *testing.T, server string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kube.KubeconfigPath())
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
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

func TestFaultRelayKilledRepeatedly(t *testing.T) {
	f := newFaultEnv(t, env.NATS.URL())
	const kills = 12
	_, n := f.strictScenario(
		loadSpec{Names: faultNames, Ops: faultOps, Workers: faultWorkers, Rate: faultRate, Duration: faultLoadBound},
		func(g *loadGen) []int { return g.moments(kills, 0.03, 0.9) },
		func(_ *loadGen, r **relayProc, i int) {
			// SIGKILL, as a crash: no drain, no final checkpoint. Started again at once.
			if err := (*r).Kill(); err != nil {
				t.Fatalf("kill relay: %v", err)
			}
			<-(*r).Done()
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
		published[m.Meta.UID] = true
		if m.Meta.Origin == event.Relist {
			relisted++
		}
		if m.InferredDelete() {
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
	// The paged relist; TestFaultExpiredHistoryWhileStoppedStreamed streams it.
	out := expiredHistoryWhileStopped(t, map[string]string{"RELAY_WATCH_LIST": "off"})
	requireLists(t, out, string(event.Relist), false)
}

// expiredHistoryWhileStopped stops the relay, changes objects, expires the history and
// starts the relay again, with extra vars set, and requires the relist diff; it returns the
// output of the relay that relisted.
func expiredHistoryWhileStopped(t *testing.T, extra map[string]string) string {
	t.Helper()
	ctx := context.Background()
	f := newFaultEnv(t, env.NATS.URL())
	for k, v := range extra {
		f.vars[k] = v
	}
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
	relaytest.Report(t, "published before the stop", contract.FinalState(before, live))

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
		if m.Meta.Name == fenceName {
			fence = append(fence, m)
		} else {
			rest = append(rest, m)
		}
	}
	relaytest.Report(t, "relist diff", contract.RelistDiff(rest, live, final))
	final[f.name+"/"+fenceName] = g.state()[f.name+"/"+fenceName]
	if want := final[f.name+"/"+fenceName]; len(fence) != 1 || fence[0].Meta.Type != event.Added ||
		fence[0].Meta.UID != want.UID || fence[0].Meta.ResourceVersion != want.RV {
		t.Errorf("fence: got\n%swant one added uid=%s rv=%s", describe(fence), want.UID, want.RV)
	}
	f.check(msgs, final, nil, g.uids())
	f.logRelays()
	r.stop(t)
	return r.Output()
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
		if m.Meta.Name == bigName {
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
		omitted := m.Header.Get(event.HeaderBodyOmitted)
		switch {
		case steps[i].big && (omitted != event.BodyOmittedOversize || m.Body != nil):
			t.Errorf("%s step %d (%s, big): %s=%q, body %v; want %q and no body", bigName, i, steps[i].op, event.HeaderBodyOmitted, omitted, m.Body != nil, event.BodyOmittedOversize)
		case !steps[i].big && (omitted != "" || m.Body == nil):
			t.Errorf("%s step %d (%s, small): %s=%q, body %v; want a body", bigName, i, steps[i].op, event.HeaderBodyOmitted, omitted, m.Body != nil)
		}
		if i > 0 && rvInt(t, m.Meta.ResourceVersion) <= rvInt(t, mine[i-1].Meta.ResourceVersion) {
			t.Errorf("%s: %s not after %s", bigName, m.String(), mine[i-1].String())
		}
	}
	// The stream went on past the reference-only event: later changes of other objects follow it.
	later := 0
	bigRV := rvInt(t, msgs[firstBig].Meta.ResourceVersion)
	for _, m := range msgs[firstBig+1:] {
		if m.Meta.Name != bigName && rvInt(t, m.Meta.ResourceVersion) > bigRV {
			later++
		}
	}
	t.Logf("%d later changes of other objects follow the first oversize event", later)
	if later == 0 {
		t.Errorf("no change of another object follows the oversize event: the stream stopped")
	}
}

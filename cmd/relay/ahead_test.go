package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// aheadBy is how far the forged checkpoint runs ahead of the cluster, as in the issue's
// reproduction of an etcd restored without a revision bump.
const aheadBy = 5_000_000

// waitFenceAdded writes the fence object and waits until the stream holds its added event:
// every change made before it has been relayed by then (a checkpoint cannot say so when it
// was forged ahead of the cluster).
func waitFenceAdded(t *testing.T, f *faultEnv, g *loadGen) []received {
	t.Helper()
	if err := g.createWith(context.Background(), fenceName, nil, false); err != nil {
		t.Fatalf("fence: %v", err)
	}
	fence := g.state()[f.name+"/"+fenceName]
	return waitFor(t, f.js(), f.vars["RELAY_STREAM"], "the fence's added event", func(msgs []received) bool {
		return slices.ContainsFunc(msgs, func(m received) bool {
			return m.Meta.Name == fenceName && m.Meta.UID == fence.UID && m.Meta.Type == event.Added
		})
	})
}

// clusterRV returns the namespace's ConfigMap collection resourceVersion now.
func clusterRV(t *testing.T, f *faultEnv) uint64 {
	t.Helper()
	l, err := f.cs.CoreV1().ConfigMaps(f.name).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return rvInt(t, l.ResourceVersion)
}

func TestCheckpointAheadOfTheClusterRelistsAndSkipsNothing(t *testing.T) {
	ctx := context.Background()
	f := newFaultEnv(t, env.NATS.URL())
	// The smallest duplicate window: whatever the relay publishes twice shows in the stream.
	f.vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	r := f.startRelay()
	f.waitWatching()
	g := f.load(loadSpec{Names: 3, Workers: 1})
	for _, name := range []string{"kept", "updated", "deleted"} {
		if err := g.createWith(ctx, name, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	live := g.state()
	waitCheckpoint(t, f.js(), f.name, f.key, func(rv string) bool { return rvInt(t, rv) >= rvInt(t, live[f.name+"/deleted"].RV) })
	r.stop(t)
	before := readStream(ctx, t, f.js(), f.vars["RELAY_STREAM"])
	relaytest.Report(t, "published before the stop", contract.FinalState(before, live))

	// While the relay is stopped: changes the relist diff must find, then the checkpoint
	// moves far ahead, as after an etcd restore without a revision bump.
	if err := g.updateWith(ctx, "updated", map[string]string{"v": "2"}, false); err != nil {
		t.Fatal(err)
	}
	if err := g.delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	if err := g.createWith(ctx, "created-while-stopped", nil, false); err != nil {
		t.Fatal(err)
	}
	stopped := g.state()
	cluster := clusterRV(t, f)
	forged := strconv.FormatUint(cluster+aheadBy, 10)
	kv, err := f.js().KeyValue(ctx, f.name)
	if err != nil {
		t.Fatalf("checkpoint bucket: %v", err)
	}
	value, _ := json.Marshal(map[string]any{"resourceVersion": forged, "savedAt": time.Now().UTC(), "writer": "restored-cluster"})
	if _, err := kv.Put(ctx, f.key, value); err != nil {
		t.Fatalf("forge checkpoint: %v", err)
	}

	r = f.startRelay()
	addr := healthAddr(t, r)
	waitOutput(t, r, "resourceVersion ahead of the cluster", `"checkpoint_rv":"`+forged+`"`, `"cluster_rv":"`)
	// The relist's state is read before the objects below exist: they must come live, not in it
	// (a streamed list may take its snapshot a moment after the log line above).
	waitOutput(t, r, `"origin":"relist"`, `"message":"listed"`)
	// Created after the restart: a watch from the forged resourceVersion would never show them.
	for _, name := range []string{"created-after-1", "created-after-2"} {
		if err := g.createWith(ctx, name, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	msgs := waitFenceAdded(t, f, g)
	final := g.state()
	after := msgs[len(before):]
	var relisted, liveAfter []received
	for _, m := range after {
		if m.Meta.Origin == event.Relist {
			relisted = append(relisted, m)
		} else {
			liveAfter = append(liveAfter, m)
		}
	}
	relaytest.Report(t, "relist diff", contract.RelistDiff(relisted, live, stopped))
	for _, name := range []string{"created-after-1", "created-after-2", fenceName} {
		want := final[f.name+"/"+name]
		got := byObject(liveAfter)[f.name+"/"+name]
		if len(got) != 1 || got[0].Meta.Type != event.Added || got[0].Meta.UID != want.UID || got[0].Meta.ResourceVersion != want.RV {
			t.Errorf("%s: got\n%swant one live added uid=%s rv=%s", name, describe(got), want.UID, want.RV)
		}
	}
	if extra := len(liveAfter) - 3; extra != 0 {
		t.Errorf("live events after the restart: got\n%swant the three objects created after it", describe(liveAfter))
	}
	f.check(msgs, final, nil, g.uids())
	if got := metricSum(scrape(t, addr), "kube_nats_relay_resource_version_ahead_total"); got != 1 {
		t.Errorf("kube_nats_relay_resource_version_ahead_total: got %v, want 1", got)
	}
	// The checkpoint is back in the cluster's history.
	waitCheckpoint(t, f.js(), f.name, f.key, func(rv string) bool {
		return rvInt(t, rv) >= rvInt(t, final[f.name+"/"+fenceName].RV) && rvInt(t, rv) < cluster+aheadBy
	})
	// The restore began history epoch 1: the relisted and live events carry it (their ids
	// differ from any the cluster's earlier history produced), saved with the checkpoint.
	relaytest.Report(t, "history epoch of the events after the restore", checkHistory(ctx, t, f, after, 1))
	relaytest.Report(t, "history epoch 0 before it", checkHistory(ctx, t, f, before, 0))
	if got := checkpointHistory(ctx, t, f); got != 1 {
		t.Errorf("history saved with the checkpoint: got %d, want 1", got)
	}
	f.logRelays()
	r.stop(t)
	// A second restart, nothing forged: the same epoch, nothing published twice.
	msgs = restartKeepsHistory(ctx, t, f, g, msgs, 1, "created-after-second-restart", "")
	// A relay killed right after beginning the epoch, before the relist moved the checkpoint:
	// the restart finds the stale checkpoint the epoch began at and keeps the epoch, so the
	// relist's events would keep their ids.
	restartKeepsHistory(ctx, t, f, g, msgs, 1, "created-after-third-restart", forged)
}

func TestObjectRecreatedUnderAStaleHigherIndexEntryIsPublished(t *testing.T) {
	ctx := context.Background()
	f := newFaultEnv(t, env.NATS.URL())
	r := f.startRelay()
	f.waitWatching()
	g := f.load(loadSpec{Names: 3, Workers: 1})
	if err := g.createWith(ctx, "before", nil, false); err != nil {
		t.Fatal(err)
	}
	waitCheckpoint(t, f.js(), f.name, f.key, func(rv string) bool { return rvInt(t, rv) >= rvInt(t, g.state()[f.name+"/before"].RV) })
	r.stop(t)

	// While the relay is stopped: the object is created, then something else, and the index
	// gets an entry for the object's name under another uid at that later resourceVersion: the
	// stale entry of an object from a history the cluster no longer has (an etcd restore). The
	// resume finds nothing ahead of the cluster: the watch replays the creation.
	for _, name := range []string{"recreated", "later"} {
		if err := g.createWith(ctx, name, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	stale := g.state()[f.name+"/later"].RV
	idx, err := checkpoint.OpenIndex(ctx, f.js(), checkpoint.IndexConfig{Bucket: f.vars["RELAY_INDEX_BUCKET"]})
	if err != nil {
		t.Fatalf("index: %v", err)
	}
	if _, err := f.js().PublishMsg(ctx, idx.Record(f.key, f.name+"/recreated", "00000000-0000-0000-0000-0000000000aa", stale, nil)); err != nil {
		t.Fatalf("write stale index entry: %v", err)
	}

	r = f.startRelay()
	msgs := waitFenceAdded(t, f, g)
	want := g.state()[f.name+"/recreated"]
	got := byObject(msgs)[f.name+"/recreated"]
	if len(got) != 1 || got[0].Meta.Type != event.Added || got[0].Meta.UID != want.UID || got[0].Meta.ResourceVersion != want.RV {
		t.Errorf("recreated: got\n%swant one added uid=%s rv=%s (stale index entry at rv %s)", describe(got), want.UID, want.RV, stale)
	}
	if strings.Contains(r.Output(), "resourceVersion ahead of the cluster") {
		t.Errorf("the resume relisted; this test is about the watch's replay:\n%s", r.Output())
	}
	f.check(msgs, g.state(), nil, g.uids())
	r.stop(t)
}

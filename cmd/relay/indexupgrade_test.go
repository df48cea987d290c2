package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestRelayUpgradedFromPerObjectIndexKeysRelistsAgainstThem starts from an index bucket as
// releases before the journal left it (one key per object), with the history expired while
// the relay was stopped: the relay must load those keys, diff the relist against them (the
// deletes made meanwhile inferred once, the changed objects published, the unchanged ones
// not), and leave the bucket with the journal only.
func TestRelayUpgradedFromPerObjectIndexKeysRelistsAgainstThem(t *testing.T) {
	ctx := context.Background()
	f := newFaultEnv(t, env.NATS.URL())
	// The smallest duplicate window: a re-published unchanged object would show.
	f.vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	r := f.startRelay()
	f.waitWatching()
	g := f.load(loadSpec{Names: 8, Workers: 1})
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%d", i)
		if err := g.create(ctx, names[i], g.rng); err != nil {
			t.Fatal(err)
		}
	}
	live := g.state()
	last := live[f.name+"/"+names[len(names)-1]].RV
	waitCheckpoint(t, f.js(), f.name, f.key, func(rv string) bool { return rvInt(t, rv) >= rvInt(t, last) })
	r.stop(t)

	// Turn the journal into the per-object keys an older relay would have written.
	bucket := f.vars["RELAY_INDEX_BUCKET"]
	idx, err := checkpoint.OpenIndex(ctx, f.js(), checkpoint.IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct{ object, uid, rv string }
	var recs []rec
	if _, err := idx.Load(ctx, f.key, func(object, uid, rv string, _ []string) { recs = append(recs, rec{object, uid, rv}) }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(names) {
		t.Fatalf("index before the downgrade: got %d objects, want %d", len(recs), len(names))
	}
	stream, err := f.js().Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject("$KV."+bucket+".=j/>")); err != nil {
		t.Fatalf("purge the journal: %v", err)
	}
	for _, e := range recs {
		if _, err := f.js().PublishMsg(ctx, idx.Record(f.key, e.object, e.uid, e.rv, nil)); err != nil {
			t.Fatal(err)
		}
	}

	// While stopped: two deleted, two updated, the rest unchanged; then the history expires.
	for _, n := range names[:2] {
		if err := g.delete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names[2:4] {
		if err := g.update(ctx, n, g.rng); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Kube.ExpireHistory(ctx); err != nil {
		t.Fatalf("expire history: %v", err)
	}
	before := len(readStream(ctx, t, f.js(), f.vars["RELAY_STREAM"]))
	r = f.startRelay()
	waitOutput(t, r, "resourceVersion expired, relisting")
	msgs := waitFenceAdded(t, f, g)
	after := msgs[before:]
	count := func(name string, typ event.Type) int {
		n := 0
		for _, m := range after {
			if m.Meta.Name == name && m.Meta.Type == typ {
				n++
			}
		}
		return n
	}
	for _, n := range names[:2] {
		if got := count(n, event.Deleted); got != 1 {
			t.Errorf("%s deleted while stopped: got %d deleted events after the upgrade, want 1", n, got)
		}
	}
	for _, n := range names[2:4] {
		if got := count(n, event.Modified); got != 1 {
			t.Errorf("%s updated while stopped: got %d modified events after the upgrade, want 1", n, got)
		}
	}
	for _, n := range names[4:] {
		for _, m := range after {
			if m.Meta.Name == n {
				t.Errorf("%s unchanged: published again after the upgrade (%s)", n, m.Meta.Type)
			}
		}
	}
	f.check(msgs, g.state(), nil, g.uids())
	r.stop(t)

	// The per-object keys are gone; the journal holds what the relay published.
	kv, err := f.js().KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if !strings.HasPrefix(k, "=j/") {
			t.Errorf("index bucket after the upgrade: per-object key %s left", k)
		}
	}
	got := map[string]string{}
	if _, err := idx.Load(ctx, f.key, func(object, uid, rv string, _ []string) { got[object] = uid + " " + rv }); err != nil {
		t.Fatal(err)
	}
	for key, o := range g.state() {
		if got[key] != o.UID+" "+o.RV {
			t.Errorf("index after the upgrade: %s = %q, want %s %s", key, got[key], o.UID, o.RV)
		}
	}
	if len(got) != len(g.state()) {
		t.Errorf("index after the upgrade: got %d objects, want %d", len(got), len(g.state()))
	}
}

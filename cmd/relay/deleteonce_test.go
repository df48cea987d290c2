package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestDeleteAckedButNotIndexedIsPublishedOnceAfterRelist kills the relay at an exact point:
// the DELETED event of an object is acknowledged by JetStream, and its index record, which the
// pipeline publishes next, never reaches nats-server (a proxy drops it). The history then
// expires, so the restarted relay relists and finds the object gone but still in its index:
// the delete must not be published a second time (inferred, with the older indexed
// resourceVersion, hence another id).
func TestDeleteAckedButNotIndexedIsPublishedOnceAfterRelist(t *testing.T) {
	ctx := context.Background()
	f := newFaultEnv(t, env.NATS.URL())
	// The smallest duplicate window: the relay must not depend on it.
	f.vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	proxy := startDropProxy(t, strings.TrimPrefix(env.NATS.URL(), "nats://"))
	f.vars["NATS_URL"] = proxy.url()
	r := f.startRelay()
	f.waitWatching()
	g := f.load(loadSpec{Names: 2, Workers: 1})
	for _, name := range []string{"victim", "bystander"} {
		if err := g.createWith(ctx, name, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	victim := g.state()[f.name+"/victim"]

	// The victim's index record: wait until the index holds the victim, then drop every
	// segment of the journal that records it.
	idx, err := checkpoint.OpenIndex(ctx, f.js(), checkpoint.IndexConfig{Bucket: f.vars["RELAY_INDEX_BUCKET"]})
	if err != nil {
		t.Fatalf("index: %v", err)
	}
	subject := idx.Record(f.key, f.name+"/victim", "", "", nil).Subject
	_, objectKey, _ := strings.Cut(strings.TrimPrefix(subject, "$KV."+f.vars["RELAY_INDEX_BUCKET"]+"."), ".")
	indexed := func() string { return indexEntry(ctx, t, idx, f.key, f.name+"/victim") }
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return indexed() == victim.UID+" "+victim.RV, nil
	}); err != nil {
		t.Fatalf("the index never held the victim: %v", err)
	}
	proxy.armSegments(idx.SegmentSubjects(f.key), `"`+objectKey+`"`)
	if err := g.delete(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proxy.dropped:
	case <-time.After(time.Minute):
		t.Fatalf("the victim's index write never came:\n%s", r.Output())
	}
	// The pipeline sends the index record only after the event's ack: the delete is in the
	// stream, its record is not in the index.
	if err := r.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-r.Done()
	before := readStream(ctx, t, f.js(), f.vars["RELAY_STREAM"])
	if got := deletesOf(before, victim.UID); got != 1 {
		t.Fatalf("deletes of the victim before the restart: got %d, want 1\n%s", got, describe(before))
	}
	if got := indexed(); got != victim.UID+" "+victim.RV {
		t.Fatalf("index entry after the kill: got %q, want the victim still indexed", got)
	}

	rev, err := env.Kube.ExpireHistory(ctx)
	if err != nil {
		t.Fatalf("expire history: %v", err)
	}
	t.Logf("etcd compacted at revision %d and kube-apiserver restarted", rev)
	f.vars["NATS_URL"] = env.NATS.URL()
	r = f.startRelay()
	waitOutput(t, r, "resourceVersion expired, relisting")
	msgs := waitFenceAdded(t, f, g)
	if got := deletesOf(msgs, victim.UID); got != 1 {
		t.Errorf("deletes of the victim: got %d, want 1\n%s", got, describe(byObject(msgs)[f.name+"/victim"]))
	}
	if !strings.Contains(r.Output(), "delete already published") {
		t.Errorf("the relay did not say it found the delete in the stream:\n%s", r.Output())
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return indexed() == "", nil
	}); err != nil {
		t.Errorf("the victim's index entry was not removed after the relist: %v", err)
	}
	f.check(msgs, g.state(), nil, g.uids())
	r.stop(t)
}

// deletesOf counts the deleted events of uid.
func deletesOf(msgs []received, uid string) int {
	n := 0
	for _, m := range msgs {
		if m.Meta.UID == uid && m.Meta.Type == event.Deleted {
			n++
		}
	}
	return n
}

// indexEntry returns "<uid> <rv>" of object in source's durable index, "" when it has none.
func indexEntry(ctx context.Context, t *testing.T, idx *checkpoint.Index, source, object string) string {
	t.Helper()
	var got string
	if _, err := idx.Load(ctx, source, func(o, uid, rv string, _ []string) {
		if o == object {
			got = uid + " " + rv
		}
	}); err != nil {
		t.Fatalf("load index of %s: %v", source, err)
	}
	return got
}

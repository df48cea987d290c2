package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
)

// derivedDeleteRules is derivedRules with a transition condition that fires on deletes:
// gone.
const derivedDeleteRules = `
resources:
  - resource: configmaps
    namespaces: [%s]
    events: [added, deleted]
    derived:
      - name: ready
        condition: 'object.?data.?state.orValue("") == "ready"'
      - name: gone
        condition: 'eventType == "deleted"'
`

// derivedSubject is the subject of the derived event name of the change typ of ConfigMap
// ns/obj, published by a relay of cluster with the default prefix.
func derivedSubject(cluster, ns, obj string, typ event.Type, name string) string {
	return event.Meta{Cluster: cluster, Version: "v1", Resource: "configmaps", Namespace: ns, Name: obj,
		Type: typ, Derived: name}.Subject("kube").String()
}

// openIndex opens the object index of the relay vars configure.
func openIndex(t *testing.T, js jetstream.JetStream, vars map[string]string) *checkpoint.Index {
	t.Helper()
	idx, err := checkpoint.OpenIndex(context.Background(), js, checkpoint.IndexConfig{Bucket: vars["RELAY_INDEX_BUCKET"]})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// armIndexRecord makes proxy drop the index segments that hold a record of ConfigMap key of
// the relay vars configure, watching namespace name: the record's change is acked, its index
// record never durable.
func armIndexRecord(t *testing.T, js jetstream.JetStream, proxy *dropProxy, vars map[string]string, name, key string) {
	t.Helper()
	idx := openIndex(t, js, vars)
	source := configMapsKey(name, name)
	subject := idx.Record(source, key, "", "", nil).Subject
	_, objectKey, _ := strings.Cut(strings.TrimPrefix(subject, "$KV."+vars["RELAY_INDEX_BUCKET"]+"."), ".")
	proxy.armSegments(idx.SegmentSubjects(source), `"`+objectKey+`"`)
}

// removeIndexEntry removes ConfigMap key from the index of the relay vars configure, watching
// namespace name, as a relay does when the object is deleted; the relay must be stopped.
func removeIndexEntry(t *testing.T, js jetstream.JetStream, vars map[string]string, name, key string) {
	t.Helper()
	idx := openIndex(t, js, vars)
	source := configMapsKey(name, name)
	journal, err := idx.Load(context.Background(), source, func(string, string, string, []string) {})
	if err != nil {
		t.Fatalf("load the index: %v", err)
	}
	done := make(chan error, 1)
	journal.Write(idx.Record(source, key, "", "", nil), func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("remove the index entry of %s: %v", key, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the removal of the index entry of %s was never acknowledged", key)
	}
	if got := indexEntry(context.Background(), t, idx, source, key); got != "" {
		t.Fatalf("the index still holds %s: %s", key, got)
	}
}

// killWhenDropped waits until the proxy dropped a publish, then kills the relay: the steps of
// the change before the dropped one are acked, the dropped one and those after it are not.
func killWhenDropped(t *testing.T, r *relayProc, proxy *dropProxy, what string) {
	t.Helper()
	select {
	case <-proxy.dropped:
	case <-time.After(time.Minute):
		t.Fatalf("%s never came:\n%s", what, r.Output())
	}
	if err := r.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-r.Done()
}

// relistAndFence expires the history, starts the relay, waits for its relist and for its
// checkpoint to pass a fence ConfigMap created after it, and returns the stream then: every
// change of the relist is handled by that point.
func relistAndFence(t *testing.T, vars map[string]string, cs kubernetes.Interface, name string) (*relayProc, []received) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.ExpireHistory(ctx); err != nil {
		t.Fatalf("expire history: %v", err)
	}
	r := startRelay(t, vars)
	waitOutput(t, r, "resourceVersion expired, relisting")
	fence := createConfigMap(t, cs, name, "fence", nil, nil)
	waitCheckpoint(t, jsClient(t), vars["RELAY_CHECKPOINT_BUCKET"], configMapsKey(name, name), rvAtLeast(t, fence.ResourceVersion))
	msgs := readStream(ctx, t, jsClient(t), vars["RELAY_STREAM"])
	if countOf(msgs, name, "fence", event.Added) != 1 {
		t.Fatalf("the checkpoint passed the fence but its event is not in the stream\n%s", describe(msgs))
	}
	return r, msgs
}

// TestDerivedStateEventAckedButNotIndexedIsNotRepeatedByARelist kills the relay between a
// state condition's derived event's ack and its change's index record; the object changes
// again while the relay is down (the condition still holds) and the history expires. The
// relist finds the object at a newer resourceVersion than both, with the index still saying
// the condition did not hold: it must find the derived event in the stream, later than the
// index record, and publish nothing (not the rise again under the newer change's id).
func TestDerivedStateEventAckedButNotIndexedIsNotRepeatedByARelist(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	proxy := startDropProxy(t, strings.TrimPrefix(env.NATS.URL(), "nats://"))
	vars["NATS_URL"] = proxy.url()
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	key := name + "/web"
	createConfigMap(t, cs, name, "web", nil, map[string]string{"state": "pending"})
	waitFor(t, js, vars["RELAY_STREAM"], "the added event", func(m []received) bool { return countOf(m, name, "web", event.Added) == 1 })

	armIndexRecord(t, js, proxy, vars, name, key)
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"})
	killWhenDropped(t, r, proxy, "the index record of the rise")
	before := readStream(ctx, t, js, vars["RELAY_STREAM"])
	if got := len(contract.DerivedOf(before, key, "ready")); got != 1 {
		t.Fatalf("ready events before the restart: got %d, want 1\n%s", got, describe(before))
	}

	setCMData(t, cs, name, "web", map[string]string{"noise": "1"}) // still ready
	vars["NATS_URL"] = env.NATS.URL()
	r, msgs := relistAndFence(t, vars, cs, name)
	if got := contract.DerivedOf(msgs, key, "ready"); len(got) != 1 {
		t.Errorf("ready events: got %d, want 1 (the rise before the kill)\n%s", len(got), describe(msgs))
	}
	if !strings.Contains(r.Output(), "derived event already published") {
		t.Errorf("the relay did not say it found the derived event in the stream:\n%s", r.Output())
	}
	addr := healthAddr(t, r)
	if v, _ := metricValue(scrape(t, addr), `kube_nats_relay_stream_reads_total{purpose="derived",resource="configmaps"}`); v < 1 {
		t.Errorf("derived stream reads: got %v, want at least 1 (the relist's look-up)", v)
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

// TestDeletedObjectsDerivedEventsSurviveAKillBeforeTheirAckAndARelist kills the relay
// between a delete's ack and its derived event's; the history then expires, so the
// restarted relay relists, finds the object gone and its delete in the stream. The delete's
// derived event must be published then, once, under the id it would have had: derived from
// the delete's change, with its resourceVersion and origin.
func TestDeletedObjectsDerivedEventsSurviveAKillBeforeTheirAckAndARelist(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedDeleteRules, name))
	proxy := startDropProxy(t, strings.TrimPrefix(env.NATS.URL(), "nats://"))
	vars["NATS_URL"] = proxy.url()
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	key := name + "/victim"
	createConfigMap(t, cs, name, "victim", nil, map[string]string{"state": "ready"})
	waitFor(t, js, vars["RELAY_STREAM"], "the victim's rise", func(m []received) bool { return len(contract.DerivedOf(m, key, "ready")) == 1 })

	proxy.arm(derivedSubject(name, name, "victim", event.Deleted, "gone"))
	if err := cs.CoreV1().ConfigMaps(name).Delete(ctx, "victim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	killWhenDropped(t, r, proxy, "the delete's derived event")
	before := readStream(ctx, t, js, vars["RELAY_STREAM"])
	if countOf(contract.Ordinary(before), name, "victim", event.Deleted) != 1 || len(contract.DerivedOf(before, key, "gone")) != 0 {
		t.Fatalf("before the restart: want the delete without its derived event\n%s", describe(before))
	}

	vars["NATS_URL"] = env.NATS.URL()
	r, msgs := relistAndFence(t, vars, cs, name)
	if got := countOf(contract.Ordinary(msgs), name, "victim", event.Deleted); got != 1 {
		t.Errorf("deletes of the victim: got %d, want 1\n%s", got, describe(msgs))
	}
	gone := contract.DerivedOf(msgs, key, "gone")
	if len(gone) != 1 {
		t.Fatalf("gone events: got %d, want 1\n%s", len(gone), describe(msgs))
	}
	var deleted received
	for _, m := range contract.Ordinary(msgs) {
		if m.Meta.Name == "victim" && m.Meta.Type == event.Deleted {
			deleted = m
		}
	}
	if got, want := gone[0].Meta.ChangeID(), deleted.Meta.ID(); got != want {
		t.Errorf("gone derives from change %s, want the delete's %s", got, want)
	}
	if gone[0].Meta.Origin != deleted.Meta.Origin || gone[0].Meta.ResourceVersion != deleted.Meta.ResourceVersion {
		t.Errorf("gone: origin %s at %s, want the delete's %s at %s", gone[0].Meta.Origin, gone[0].Meta.ResourceVersion,
			deleted.Meta.Origin, deleted.Meta.ResourceVersion)
	}
	if got := field(gone[0].Body, "data", "state"); got != "ready" {
		t.Errorf("gone body: data.state %v, want the delete's last state (ready)", got)
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

// TestDerivedLiveChangesPastTheReplayHorizonReadNoStream restarts a relay over a stream that
// holds derived events; the changes made after it started (past its replay horizon) fire
// derived events without a single read of the stream: no previous run can have published
// them.
func TestDerivedLiveChangesPastTheReplayHorizonReadNoStream(t *testing.T) {
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	createConfigMap(t, cs, name, "earlier", nil, map[string]string{"state": "ready"})
	waitFor(t, js, vars["RELAY_STREAM"], "the earlier rise", func(m []received) bool {
		return len(contract.DerivedOf(m, name+"/earlier", "ready")) == 1
	})
	r.stop(t)

	r = startRelay(t, vars)
	addr := healthAddr(t, r)
	waitOutput(t, r, `"watching"`)
	const objects = 5
	for i := range objects {
		obj := fmt.Sprintf("live-%d", i)
		createConfigMap(t, cs, name, obj, nil, map[string]string{"state": "pending", "phase": "a"})
		setCMData(t, cs, name, obj, map[string]string{"state": "ready", "phase": "b"})
	}
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "the live rises and transitions", func(m []received) bool {
		for i := range objects {
			key := fmt.Sprintf("%s/live-%d", name, i)
			if len(contract.DerivedOf(m, key, "ready")) != 1 || len(contract.DerivedOf(m, key, "phase-changed")) != 1 {
				return false
			}
		}
		return true
	})
	text := scrape(t, addr)
	if v, ok := metricValue(text, `kube_nats_relay_stream_reads_total{purpose="derived",resource="configmaps"}`); !ok || v != 0 {
		t.Errorf("derived stream reads: got %v (present %v), want 0 for %d live derived events", v, ok, 2*objects)
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

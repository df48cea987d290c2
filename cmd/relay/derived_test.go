package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// derivedRules relays one namespace's ConfigMaps, publishing only their added and deleted
// events, with a state condition (ready: data.state is "ready") and a transition condition
// (phase-changed: data.phase differs from the previous state's).
const derivedRules = `
resources:
  - resource: configmaps
    namespaces: [%s]
    events: [added, deleted]
    derived:
      - name: ready
        condition: 'object.?data.?state.orValue("") == "ready"'
      - name: phase-changed
        condition: 'oldObject != null && oldObject.?data.?phase.orValue("") != object.?data.?phase.orValue("")'
        fields: [data.phase]
`

// setData merges data into the ConfigMap ns/name.
func setCMData(t *testing.T, cs kubernetes.Interface, ns, name string, data map[string]string) {
	t.Helper()
	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range data {
		cm.Data[k] = v
	}
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// derivedVars configures a relay with derivedRules for namespace name and the smallest
// duplicate window, so that the stream shows every copy the relay sends.
func derivedVars(t *testing.T, name string) map[string]string {
	vars := relayVars(name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedRules, name))
	vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	return vars
}

// checkDerived requires the contract of derived events and of the ordinary ones.
func checkDerived(t *testing.T, msgs []received, prefix string) {
	t.Helper()
	for _, p := range append(append(contract.Envelope(msgs, prefix), contract.NoDuplicateIDs(msgs)...), contract.Derived(msgs)...) {
		t.Error(p)
	}
	for _, p := range contract.PerUIDOrder(contract.Ordinary(msgs)) {
		t.Error(p)
	}
}

func TestDerivedStateEventPublishedOncePerRiseAndTransitionsOnEachChange(t *testing.T) {
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)
	key := name + "/web"

	createConfigMap(t, cs, name, "web", nil, map[string]string{"state": "pending", "phase": "a"})
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"})  // ready rises: published, the change itself filtered
	setCMData(t, cs, name, "web", map[string]string{"noise": "1"})      // holds: nothing
	setCMData(t, cs, name, "web", map[string]string{"phase": "b"})      // phase-changed
	setCMData(t, cs, name, "web", map[string]string{"state": "broken"}) // falls: recorded, nothing published
	setCMData(t, cs, name, "web", map[string]string{"noise": "2"})      // still down: nothing
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"})  // rises again
	if err := cs.CoreV1().ConfigMaps(name).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, stream, "the delete", func(m []received) bool { return countOf(m, name, "web", event.Deleted) == 1 })
	checkDerived(t, msgs, "kube")

	ready := contract.DerivedOf(msgs, key, "ready")
	if len(ready) != 2 {
		t.Fatalf("ready events: got %d, want 2 (one per rise)\n%s", len(ready), describe(msgs))
	}
	for _, m := range ready {
		if m.Meta.Type != event.Modified || m.Meta.Origin != event.Live || m.Body == nil {
			t.Errorf("%s: want a live modified change's derived event with the change's body", m.String())
		}
		if got := m.Header.Get(event.HeaderCEType); got != "io.kube-nats-relay.object.derived.ready" {
			t.Errorf("ce-type: got %q", got)
		}
		if !strings.HasSuffix(m.Subject, ".web.modified.derived.ready") {
			t.Errorf("subject: got %q, want it to end .web.modified.derived.ready", m.Subject)
		}
	}
	if got := field(ready[1].Body, "data", "state"); got != "ready" {
		t.Errorf("second ready: body data.state %v, want ready", got)
	}
	phase := contract.DerivedOf(msgs, key, "phase-changed")
	if len(phase) != 1 {
		t.Fatalf("phase-changed events: got %d, want 1\n%s", len(phase), describe(msgs))
	}
	if got, want := phase[0].Body["data"], map[string]any{"phase": "b"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("phase-changed body data: got %v, want the projection %v", got, want)
	}
	if got := types(contract.Ordinary(msgs)); got != "added,deleted" {
		t.Errorf("ordinary events: got %s, want added,deleted (modifications filtered)", got)
	}
	r.stop(t)
}

// TestDerivedEventAckedButNotIndexedIsNotRepeatedAfterKill kills the relay at an exact point:
// the derived event of a change is acknowledged, and the change's index record, which the
// pipeline publishes next, never reaches nats-server (a proxy drops it). The restarted relay
// replays the change from its checkpoint, finds the state condition not recorded as held, and
// must not publish the derived event again, although the duplicate window has long passed.
func TestDerivedEventAckedButNotIndexedIsNotRepeatedAfterKill(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	proxy := startDropProxy(t, strings.TrimPrefix(env.NATS.URL(), "nats://"))
	vars["NATS_URL"] = proxy.url()
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)
	key := name + "/web"

	// An earlier derived event of another object, so that the stream holds derived events
	// of the resource when the relay restarts.
	createConfigMap(t, cs, name, "other", nil, map[string]string{"state": "ready"})
	createConfigMap(t, cs, name, "web", nil, map[string]string{"state": "pending"})
	waitFor(t, js, stream, "the added events", func(m []received) bool { return countOf(m, name, "web", event.Added) == 1 })

	idx, err := checkpoint.OpenIndex(ctx, js, checkpoint.IndexConfig{Bucket: vars["RELAY_INDEX_BUCKET"]})
	if err != nil {
		t.Fatal(err)
	}
	src := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	// The added's record first, so that only the next change's record is held back.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return indexEntry(ctx, t, idx, src, key) != "", nil
	}); err != nil {
		t.Fatalf("the index never held %s: %v", key, err)
	}
	subject := idx.Record(src, key, "", "", nil).Subject
	_, objectKey, _ := strings.Cut(strings.TrimPrefix(subject, "$KV."+vars["RELAY_INDEX_BUCKET"]+"."), ".")
	proxy.armSegments(idx.SegmentSubjects(src), `"`+objectKey+`"`)
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"})
	select {
	case <-proxy.dropped:
	case <-time.After(time.Minute):
		t.Fatalf("the index record of the change never came:\n%s", r.Output())
	}
	if err := r.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-r.Done()
	before := readStream(ctx, t, js, stream)
	if got := len(contract.DerivedOf(before, key, "ready")); got != 1 {
		t.Fatalf("ready events before the restart: got %d, want 1\n%s", got, describe(before))
	}

	vars["NATS_URL"] = env.NATS.URL()
	r = startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	setCMData(t, cs, name, "web", map[string]string{"state": "done"}) // falls
	if err := cs.CoreV1().ConfigMaps(name).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, stream, "the delete", func(m []received) bool { return countOf(m, name, "web", event.Deleted) == 1 })
	if got := len(contract.DerivedOf(msgs, key, "ready")); got != 1 {
		t.Errorf("ready events: got %d, want 1\n%s", got, describe(msgs))
	}
	if !strings.Contains(r.Output(), "derived event already published") {
		t.Errorf("the relay did not say it found the derived event in the stream:\n%s", r.Output())
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

// TestDerivedEventsAfterRelistComeFromTheIndex stops the relay while one object becomes
// ready, another becomes ready and falls again, and a third stays ready; the history then
// expires. The relist compares the listed states with the conditions the index recorded: the
// first is published once, marked relist; the others publish nothing.
func TestDerivedEventsAfterRelistComeFromTheIndex(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)
	createConfigMap(t, cs, name, "rises", nil, map[string]string{"state": "pending"})
	createConfigMap(t, cs, name, "flaps", nil, map[string]string{"state": "pending"})
	createConfigMap(t, cs, name, "stays", nil, map[string]string{"state": "ready"})
	waitFor(t, js, stream, "the added events", func(m []received) bool {
		return len(contract.DerivedOf(m, name+"/stays", "ready")) == 1 && countOf(m, name, "flaps", event.Added) == 1 &&
			countOf(m, name, "rises", event.Added) == 1
	})
	r.stop(t)

	setCMData(t, cs, name, "rises", map[string]string{"state": "ready"})
	setCMData(t, cs, name, "flaps", map[string]string{"state": "ready"})
	setCMData(t, cs, name, "flaps", map[string]string{"state": "pending"})
	setCMData(t, cs, name, "stays", map[string]string{"noise": "1"})
	if _, err := env.Kube.ExpireHistory(ctx); err != nil {
		t.Fatalf("expire history: %v", err)
	}
	r = startRelay(t, vars)
	waitOutput(t, r, "resourceVersion expired, relisting")
	// The fence sorts first in the relist and is published concurrently with the others: its
	// event alone says nothing about theirs. The checkpoint reaching its resourceVersion does:
	// it passes a change only once the change and every earlier one are handled.
	fence := createConfigMap(t, cs, name, "fence", nil, nil)
	src := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	waitCheckpoint(t, js, vars["RELAY_CHECKPOINT_BUCKET"], src, rvAtLeast(t, fence.ResourceVersion))
	msgs := readStream(ctx, t, js, stream)
	if countOf(msgs, name, "fence", event.Added) != 1 {
		t.Fatalf("the checkpoint passed the fence but its event is not in the stream\n%s", describe(msgs))
	}
	rises := contract.DerivedOf(msgs, name+"/rises", "ready")
	if len(rises) != 1 || rises[0].Meta.Origin != event.Relist {
		t.Errorf("ready of rises: got %d events (%s), want 1 of origin relist\n%s", len(rises), describe(rises), describe(msgs))
	}
	for _, n := range []string{"flaps", "stays"} {
		want := 0
		if n == "stays" {
			want = 1 // from before the restart
		}
		if got := len(contract.DerivedOf(msgs, name+"/"+n, "ready")); got != want {
			t.Errorf("ready of %s: got %d, want %d\n%s", n, got, want, describe(msgs))
		}
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

// TestDerivedFallingEdgeIsRecordedAcrossRestart: a change whose own event is filtered and
// that only makes a state condition fall publishes nothing, but must be recorded in the
// object index; otherwise a relay restarted after it would still take the condition for held
// and lose the next rise.
func TestDerivedFallingEdgeIsRecordedAcrossRestart(t *testing.T) {
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)
	key := name + "/web"
	createConfigMap(t, cs, name, "web", nil, map[string]string{"state": "ready"})
	waitFor(t, js, stream, "the first rise", func(m []received) bool { return len(contract.DerivedOf(m, key, "ready")) == 1 })
	setCMData(t, cs, name, "web", map[string]string{"state": "broken"}) // falls: filtered, nothing published
	createConfigMap(t, cs, name, "fence", nil, nil)
	waitFor(t, js, stream, "the fence", func(m []received) bool { return countOf(m, name, "fence", event.Added) == 1 })
	r.stop(t)

	r = startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"}) // rises again
	msgs := waitFor(t, js, stream, "the second rise", func(m []received) bool { return len(contract.DerivedOf(m, key, "ready")) == 2 })
	if got := types(contract.Ordinary(msgs)); got != "added,added" {
		t.Errorf("ordinary events: got %s, want added,added (the modifications filtered)", got)
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

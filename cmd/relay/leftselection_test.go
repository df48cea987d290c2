package main

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// consumerEventAt decodes the stream's message seq as a consumer does.
func consumerEventAt(t *testing.T, js jetstream.JetStream, stream string, seq uint64) consumer.Event {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		t.Fatalf("get message %d: %v", seq, err)
	}
	e, err := consumer.DecodeRaw(m)
	if err != nil {
		t.Fatalf("decode message %d: %v", seq, err)
	}
	return e
}

// mirroredConfigMaps lists the objects the state mirror holds for namespace ns.
func mirroredConfigMaps(t *testing.T, js jetstream.JetStream, bucket, cluster, ns string) map[string]bool {
	t.Helper()
	w, values := watchMirror(t, js, bucket, cluster, ns)
	defer w.Stop()
	names := map[string]bool{}
	for n := range values {
		names[n] = true
	}
	return names
}

// watchMirror watches the state mirror's ConfigMaps of namespace ns, as a consumer starting
// now would, and returns the watcher, positioned after the current values, with those values
// by object name. The caller stops the watcher.
func watchMirror(t *testing.T, js jetstream.JetStream, bucket, cluster, ns string) (jetstream.KeyWatcher, map[string]string) {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := event.MirrorFilter(cluster, schema.GroupResource{Resource: "configmaps"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchFiltered(ctx, []string{keys})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for e := range w.Updates() {
		if e == nil {
			break
		}
		if e.Operation() != jetstream.KeyValuePut {
			continue // the marker of a recently deleted object
		}
		n, v := mirrorEntry(t, e)
		values[n] = v
	}
	return w, values
}

// TestObjectLeavingTheSelectionIsMarked relays ConfigMaps with the label selector app!=skip:
// a ConfigMap relabelled app=skip still exists, and its deleted event says it left the
// selection; a deleted ConfigMap's event does not; the relabelled one comes back as added when
// it matches again. The state mirror drops the object that left, like a deleted one.
func TestObjectLeavingTheSelectionIsMarked(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	cms := cs.CoreV1().ConfigMaps(name)
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	vars["RELAY_LABEL_SELECTOR"] = "app!=skip"
	vars["RELAY_MIRROR_RESOURCES"] = "configmaps"
	vars["RELAY_MIRROR_BUCKET"] = name + "-mirror"
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)

	web := map[string]string{"app": "web"}
	createConfigMap(t, cs, name, "leaves", web, nil)
	createConfigMap(t, cs, name, "deleted", web, nil)
	createConfigMap(t, cs, name, "stays", web, nil)
	waitFor(t, js, stream, "the three ConfigMaps", func(m []received) bool {
		return hasKey(m, name, "leaves", event.Added) && hasKey(m, name, "deleted", event.Added) && hasKey(m, name, "stays", event.Added)
	})

	relabel := func(cmName string, labels map[string]string) {
		t.Helper()
		cm, err := cms.Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Labels = labels
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("relabel %s: %v", cmName, err)
		}
	}
	relabel("leaves", map[string]string{"app": "skip"})
	if err := cms.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, stream, "both deletes", func(m []received) bool {
		return hasKey(m, name, "leaves", event.Deleted) && hasKey(m, name, "deleted", event.Deleted)
	})
	for _, n := range []string{"leaves", "deleted"} {
		m := lastOf(t, msgs, name, n)
		e := consumerEventAt(t, js, stream, m.Seq)
		if want := n == "leaves"; e.LeftSelection != want || m.Header.Get(event.HeaderLeftSelection) != map[bool]string{true: "true"}[want] {
			t.Errorf("%s: got LeftSelection %v (header %q), want %v", m.Subject, e.LeftSelection, m.Header.Get(event.HeaderLeftSelection), want)
		}
		if e.Origin != event.Live || e.FinalStateUnknown {
			t.Errorf("%s: got origin %s, final state unknown %v, want live and known", m.Subject, e.Origin, e.FinalStateUnknown)
		}
	}
	if _, err := cms.Get(ctx, "leaves", metav1.GetOptions{}); err != nil {
		t.Fatalf("the relabelled ConfigMap: %v, want it to exist", err)
	}
	// The mirror is written before the event: both deletes are in it by now.
	if got := mirroredConfigMaps(t, js, vars["RELAY_MIRROR_BUCKET"], name, name); got["leaves"] || got["deleted"] || !got["stays"] {
		t.Errorf("mirror: got %v, want only stays", sortedKeys(got))
	}

	relabel("leaves", web)
	msgs = waitFor(t, js, stream, "the ConfigMap back in the selection", func(m []received) bool {
		return countOf(m, name, "leaves", event.Added) == 2
	})
	if got := types(byObject(msgs)[name+"/leaves"]); got != "added,deleted,added" {
		t.Errorf("events of the relabelled ConfigMap: got %s, want added,deleted,added", got)
	}
	if m := lastOf(t, msgs, name, "leaves"); m.Header.Get(event.HeaderLeftSelection) != "" || m.Meta.Origin != event.Live {
		t.Errorf("%s: got origin %s and %s %q, want a live added without the mark", m.Subject, m.Meta.Origin, event.HeaderLeftSelection, m.Header.Get(event.HeaderLeftSelection))
	}
	r.stop(t)
}

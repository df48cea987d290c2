package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// unusualRBACNames are RoleBinding names the API server accepts (RBAC names may be any path
// segment: no length limit, any bytes but "/" and "%") that a NATS subject, a KV key or a
// NATS header cannot carry as they are.
var unusualRBACNames = []string{
	strings.Repeat("r", 4100), " lead", "trail ", "a\nb", "日本 ü", "x.y", "*", ">", "~~",
}

// TestUnusualNamesAreRelayedExactly relays RoleBindings with unusual names through the real
// relay: each is published once, decoded exactly by consumer.Decode and by relay tail, found
// by a filter on its exact name, mirrored, and remembered by the object index across a
// restart (a list without a checkpoint publishes none of them again); a ConfigMap changed
// afterwards is still relayed.
func TestUnusualNamesAreRelayedExactly(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	const rbacResource = "rolebindings.rbac.authorization.k8s.io"
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = rbacResource + ",configmaps"
	vars["RELAY_NAMESPACES"] = name
	vars["RELAY_MIRROR_RESOURCES"] = rbacResource
	vars["RELAY_MIRROR_BUCKET"] = name + "-mirror"
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	rbKey := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: "rolebindings"}, Namespaced: true}})
	waitCheckpoint(t, js, name, rbKey, func(string) bool { return true })

	for _, n := range unusualRBACNames {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "none"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "nobody"}}}
		if _, err := cs.RbacV1().RoleBindings(name).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create RoleBinding %.40q: %v", n, err)
		}
	}
	msgs := waitFor(t, js, stream, "every RoleBinding's event", func(m []received) bool { return len(m) >= len(unusualRBACNames) })
	if len(msgs) != len(unusualRBACNames) {
		t.Fatalf("got %d events, want one per RoleBinding:\n%s", len(msgs), describe(msgs))
	}

	// consumer.Decode gives every name exactly.
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(len(msgs))
	if err != nil {
		t.Fatal(err)
	}
	var decoded []string
	for msg := range batch.Messages() {
		e, err := consumer.Decode(msg)
		if err != nil {
			t.Fatalf("consumer.Decode of %.80q: %v", msg.Subject(), err)
		}
		if e.Namespace != name || e.Resource != "rolebindings" || !e.Exact() {
			t.Errorf("event of %.40q: got namespace %q resource %q exact %v", e.Name, e.Namespace, e.Resource, e.Exact())
		}
		if len(msg.Subject()) > event.MaxSubjectLen {
			t.Errorf("subject of %.40q: %d bytes, want at most %d", e.Name, len(msg.Subject()), event.MaxSubjectLen)
		}
		decoded = append(decoded, e.Name)
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	checkSameNames(t, "consumer.Decode", decoded)

	// relay tail decodes them too, and its --name filter finds the long one.
	common := []string{"--server", env.NATS.URL(), "--stream", stream, "--cluster", name, "--resource", rbacResource}
	all := startTail(t, nil, append(common, "--all", "--json")...)
	records := all.next(t, len(unusualRBACNames))
	records = append(records, all.interrupt(t)...)
	var tailed []string
	for _, l := range records {
		var rec tailRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("relay tail record %.80q: %v", l, err)
		}
		tailed = append(tailed, rec.Name)
	}
	checkSameNames(t, "relay tail --json", tailed)
	long := unusualRBACNames[0]
	one := startTail(t, nil, append(common, "--all", "--name", long)...)
	lines := one.next(t, 2) // the column titles and the one event
	lines = append(lines, one.interrupt(t)...)
	if len(lines) != 2 || !strings.Contains(lines[1], name+"/"+long) {
		t.Errorf("relay tail --name <4,100 characters>: got %d lines, want the titles and that RoleBinding's event", len(lines))
	}

	// The mirror holds every RoleBinding, keyed within the bounds.
	kv, err := js.KeyValue(ctx, vars["RELAY_MIRROR_BUCKET"])
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mirrored []string
	for k := range keys.Keys() {
		v, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("mirror key %.80q: %v", k, err)
		}
		var obj struct{ Metadata struct{ Name string } }
		if err := json.Unmarshal(v.Value(), &obj); err != nil {
			t.Fatalf("mirror value of %.80q: %v", k, err)
		}
		if want := event.MirrorKey(name, schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}, name, obj.Metadata.Name); k != want {
			t.Errorf("mirror key of %.40q: got %.80q, want %.80q", obj.Metadata.Name, k, want)
		}
		mirrored = append(mirrored, obj.Metadata.Name)
	}
	checkSameNames(t, "mirror", mirrored)

	// Restart without the checkpoint: the relay lists again, and the index, loaded back with
	// the exact names, keeps every RoleBinding from being published a second time.
	r.stop(t)
	ckpt, err := js.KeyValue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := ckpt.Purge(ctx, rbKey); err != nil {
		t.Fatalf("purge checkpoint %s: %v", rbKey, err)
	}
	r = startRelay(t, vars)
	waitCheckpoint(t, js, name, rbKey, func(string) bool { return true })
	cm, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"k": "v"}
	if _, err := cs.CoreV1().ConfigMaps(name).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := waitFor(t, js, stream, "the ConfigMap's two events", func(m []received) bool { return len(m) >= len(msgs)+2 })
	for _, m := range after[len(msgs):] {
		if m.Meta.Resource != "configmaps" || m.Meta.Name != "after" {
			t.Errorf("after the restart: got %s %.40q (%s), want only the ConfigMap's events", m.Meta.Resource, m.Meta.Name, m.Meta.Type)
		}
	}
	if len(after) != len(msgs)+2 {
		t.Errorf("after the restart: got %d new events, want the ConfigMap's 2:\n%s", len(after)-len(msgs), describe(after[len(msgs):]))
	}
	r.stop(t)
}

// checkSameNames fails unless got holds each of unusualRBACNames once.
func checkSameNames(t *testing.T, what string, got []string) {
	t.Helper()
	want := slices.Clone(unusualRBACNames)
	slices.Sort(want)
	got = slices.Clone(got)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: got names %.200q, want %.200q", what, fmt.Sprint(got), fmt.Sprint(want))
	}
}

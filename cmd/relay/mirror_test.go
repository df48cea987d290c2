package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// mirrorState is what a late consumer sees in the mirror: name -> "uid rv".
func mirrorEntry(t *testing.T, e jetstream.KeyValueEntry) (string, string) {
	t.Helper()
	var obj struct {
		Metadata struct {
			Name, UID, ResourceVersion string
		} `json:"metadata"`
	}
	if err := json.Unmarshal(e.Value(), &obj); err != nil {
		t.Fatalf("mirror value of %s: %v", e.Key(), err)
	}
	return obj.Metadata.Name, obj.Metadata.UID + " " + obj.Metadata.ResourceVersion
}

func TestStateMirrorGivesLateConsumersTheLiveSetThenUpdates(t *testing.T) {
	ctx := context.Background()
	name, cms := testConfigMaps(t)
	// Some objects exist before the relay starts; initial sync is skipped, yet the mirror
	// must hold them.
	for i := range 20 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pre-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	vars["RELAY_MIRROR_RESOURCES"] = "configmaps"
	vars["RELAY_MIRROR_BUCKET"] = name + "-mirror"
	vars["RELAY_INITIAL_SYNC"] = "skip"
	r := startRelay(t, vars)
	js := jsClient(t)
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	waitCheckpoint(t, js, name, key, func(string) bool { return true })

	// 1,000 changes over 200 names: creates, updates, deletes.
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 1000; i++ {
		n := fmt.Sprintf("cm-%d", rng.IntN(200))
		cm, err := cms.Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
		case err != nil:
		case rng.IntN(3) == 0:
			err = cms.Delete(ctx, n, metav1.DeleteOptions{})
		default:
			cm.Data = map[string]string{"i": fmt.Sprint(i)}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("change %d of %s: %v", i, n, err)
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, cm := range list.Items {
		want[cm.Name] = string(cm.UID) + " " + cm.ResourceVersion
	}
	waitCheckpoint(t, js, name, key, func(rv string) bool { return rvInt(t, rv) >= rvInt(t, list.ResourceVersion) })

	// A consumer starting now: current values first, then updates.
	w, got := watchMirror(t, js, vars["RELAY_MIRROR_BUCKET"], name, name)
	defer w.Stop()
	if len(got) != len(want) {
		t.Errorf("mirror: got %d objects, want the %d that exist", len(got), len(want))
	}
	for n, v := range want {
		if got[n] != v {
			t.Errorf("mirror %s: got %q, want %q", n, got[n], v)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("mirror holds %s, which does not exist", n)
		}
	}

	// Then it follows new changes, deletes included.
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "pre-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var sawLate, sawDelete bool
	deadline := time.After(time.Minute)
	for !sawLate || !sawDelete {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				if e.Key() == event.MirrorKey(name, schema.GroupResource{Resource: "configmaps"}, name, "pre-0") {
					sawDelete = true
				}
				continue
			}
			if n, v := mirrorEntry(t, e); n == "late" && v == string(created.UID)+" "+created.ResourceVersion {
				sawLate = true
			}
		case <-deadline:
			t.Fatalf("mirror updates: saw create %v, delete %v; want both", sawLate, sawDelete)
		}
	}
	r.stop(t)
}

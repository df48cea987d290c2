package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

func TestRestartPublishesExactlyTheChangesMadeWhileStopped(t *testing.T) {
	ctx := context.Background()
	name, cms := testConfigMaps(t)
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	// The smallest duplicate window JetStream allows: a re-published event would reach the
	// stream as a second message instead of being dropped, so this test sees what the relay
	// itself sends.
	vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]

	r := startRelay(t, vars)
	waitCheckpoint(t, js, name, key, func(string) bool { return true })
	cm4, err := cms.Get(ctx, "cm-4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm4.Data["v"] = "live"
	if _, err := cms.Update(ctx, cm4, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, stream, "initial sync and one live change", func(m []received) bool { return len(m) >= 6 })
	r.stop(t)

	// Graceful shutdown leaves the checkpoint at the last published resourceVersion.
	last := msgs[len(msgs)-1].Meta.ResourceVersion
	if got := checkpointRV(ctx, t, js, name, key); got != last {
		t.Fatalf("checkpoint after shutdown: got %s, want the last published resourceVersion %s", got, last)
	}

	// Changes while the relay is down: an update, a delete, a create, and a delete followed
	// by a re-create under the same name (a new uid).
	cm0, _ := cms.Get(ctx, "cm-0", metav1.GetOptions{})
	cm0.Data["v"] = "offline"
	if _, err := cms.Update(ctx, cm0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "cm-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old2, _ := cms.Get(ctx, "cm-2", metav1.GetOptions{})
	if err := cms.Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	new2, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r = startRelay(t, vars)
	// Everything up to the list taken after the last change is published once the checkpoint
	// reaches it; wait past the duplicate window so a late re-publish would show.
	waitCheckpoint(t, js, name, key, func(rv string) bool { return rvInt(t, rv) >= rvInt(t, new2.ResourceVersion) })
	time.Sleep(500 * time.Millisecond)
	r.stop(t)
	all := readStream(ctx, t, js, stream)
	after := all[len(msgs):]

	got := make([]string, len(after))
	for i, m := range after {
		checkMessage(t, m, "kube")
		if m.Meta.Origin != event.Live {
			t.Errorf("after restart: %s %s origin %s, want live", m.Meta.Type, m.Meta.Name, m.Meta.Origin)
		}
		got[i] = fmt.Sprintf("%s %s", m.Meta.Type, m.Meta.Name)
	}
	// Events of different objects may interleave; each object's are in order.
	perObject := byObject(after)
	wantTypes := map[string]string{
		name + "/cm-0": "modified", name + "/cm-1": "deleted", name + "/cm-new": "added", name + "/cm-2": "deleted,added",
	}
	if len(after) != 5 || len(perObject) != len(wantTypes) {
		t.Fatalf("published after restart: got %v, want modified cm-0, deleted cm-1, added cm-new, deleted+added cm-2", got)
	}
	for key, want := range wantTypes {
		if types(perObject[key]) != want {
			t.Errorf("%s after restart: got %s, want %s", key, types(perObject[key]), want)
		}
	}
	if c2 := perObject[name+"/cm-2"]; len(c2) == 2 && (c2[0].Meta.UID != string(old2.UID) || c2[1].Meta.UID != string(new2.UID)) {
		t.Errorf("re-created cm-2: uids %s then %s, want %s then %s", c2[0].Meta.UID, c2[1].Meta.UID, old2.UID, new2.UID)
	}
	ids := make(map[string]int)
	for _, m := range all {
		ids[m.Meta.ID()]++
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("event id %s published %d times", id, n)
		}
	}
	if rv := checkpointRV(ctx, t, js, name, key); rvInt(t, rv) < rvInt(t, new2.ResourceVersion) {
		t.Errorf("final checkpoint %s, want at least %s", rv, new2.ResourceVersion)
	}
}

func TestInvalidConfigurationExitsWithCode2(t *testing.T) {
	name := testName(t)
	base := relayVars(name)
	base["RELAY_RESOURCES"] = "configmaps"
	dir := t.TempDir()
	tests := []struct {
		name string
		set  map[string]string
		// unset removes variables from base.
		unset []string
		want  []string
	}{
		{"bad duration", map[string]string{"RELAY_DUPLICATE_WINDOW": "10parsecs"}, nil,
			[]string{`RELAY_DUPLICATE_WINDOW="10parsecs"`}},
		{"unknown resource", map[string]string{"RELAY_RESOURCES": "configmaps,gizmos.example.com"}, nil,
			[]string{`RELAY_RESOURCES="gizmos.example.com"`, "does not serve"}},
		{"same resource twice", map[string]string{"RELAY_RESOURCES": "deployments.apps,deployments.v1.apps"}, nil,
			[]string{`RELAY_RESOURCES="deployments.v1.apps"`, "same resource"}},
		{"malformed label selector", map[string]string{"RELAY_LABEL_SELECTOR": "app in (web"}, nil,
			[]string{`RELAY_LABEL_SELECTOR="app in (web"`}},
		{"malformed field selector", map[string]string{"RELAY_FIELD_SELECTOR": "metadata.name"}, nil,
			[]string{`RELAY_FIELD_SELECTOR="metadata.name"`}},
		{"unreadable credentials file", map[string]string{"RELAY_NATS_CREDS": filepath.Join(dir, "missing.creds")}, nil,
			[]string{`RELAY_NATS_CREDS="` + filepath.Join(dir, "missing.creds") + `"`}},
		{"missing kubeconfig", map[string]string{"KUBECONFIG": filepath.Join(dir, "nope")}, nil,
			[]string{`KUBECONFIG="` + filepath.Join(dir, "nope") + `"`}},
		{"no resources", nil, []string{"RELAY_RESOURCES"},
			[]string{`RELAY_RESOURCES=""`}},
		{"several at once", map[string]string{"RELAY_STREAM_REPLICAS": "9", "RELAY_LOG_LEVEL": "loud"}, nil,
			[]string{`RELAY_STREAM_REPLICAS="9"`, `RELAY_LOG_LEVEL="loud"`}},
		{"values out of range", map[string]string{"RELAY_BUFFER_SIZE": "2147483648", "RELAY_MAX_INFLIGHT": "9223372036854775807",
			"RELAY_CHECKPOINT_INTERVAL": "1ns", "RELAY_SHUTDOWN_TIMEOUT": "0"}, nil,
			[]string{`RELAY_BUFFER_SIZE="2147483648": must be between 1 and 65536`, `RELAY_MAX_INFLIGHT="9223372036854775807": must be between 1 and 4096`,
				`RELAY_CHECKPOINT_INTERVAL="1ns": must be between 100ms and 1m`, `RELAY_SHUTDOWN_TIMEOUT="0": must be between 1s and 5m`}},
	}
	js := jsClient(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{}
			for k, v := range base {
				vars[k] = v
			}
			// A stream of its own: nothing may be created or published on a config error.
			vars["RELAY_STREAM"] = fmt.Sprintf("%s%d", strings.ToUpper(name), i)
			for k, v := range tt.set {
				vars[k] = v
			}
			for _, k := range tt.unset {
				delete(vars, k)
			}
			requireExit(t, vars, 2, tt.want)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := js.Stream(ctx, vars["RELAY_STREAM"]); err != jetstream.ErrStreamNotFound {
				t.Errorf("stream after a configuration error: got %v, want not found", err)
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// TestRelayUpgradedFromLegacyNamesResumesWithoutRepublishing runs a relay as an older version
// ran by default (stream KUBE, buckets kube-relay-*), then the same relay without any of the
// name variables: it keeps the legacy names, says so, and resumes from its checkpoints,
// publishing the one change made meanwhile and nothing again. A relay of another cluster,
// whose subjects KUBE does not capture, takes its per-cluster names.
func TestRelayUpgradedFromLegacyNamesResumesWithoutRepublishing(t *testing.T) {
	ctx := context.Background()
	name, cms := testConfigMaps(t)
	js := jsClient(t)
	// The legacy names are shared by the whole test bed: this test is their only user, and
	// removes what it made.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, event.LegacyStream)
		for _, b := range []string{event.LegacyCheckpointBucket, event.LegacyIndexBucket, event.LegacyMirrorBucket} {
			_ = js.DeleteKeyValue(ctx, b)
		}
	})
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	vars["RELAY_MIRROR_RESOURCES"] = "configmaps"
	// The smallest duplicate window: an event published again would show as a second message.
	vars["RELAY_DUPLICATE_WINDOW"] = "100ms"
	old := map[string]string{
		"RELAY_STREAM":            event.LegacyStream,
		"RELAY_CHECKPOINT_BUCKET": event.LegacyCheckpointBucket,
		"RELAY_INDEX_BUCKET":      event.LegacyIndexBucket,
		"RELAY_MIRROR_BUCKET":     event.LegacyMirrorBucket,
	}
	for k, v := range old {
		vars[k] = v
	}
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Namespace: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}})

	r := startRelay(t, vars)
	waitFor(t, js, event.LegacyStream, "the initial sync", func(m []received) bool { return len(m) >= 3 })
	waitCheckpoint(t, js, event.LegacyCheckpointBucket, key, func(string) bool { return true })
	r.stop(t)

	cm, err := cms.Get(ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "while upgrading"
	changed, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for k := range old {
		delete(vars, k)
	}
	r = startRelay(t, vars)
	resumed(t, r, js, event.LegacyCheckpointBucket, key, changed.ResourceVersion)
	r.stop(t)
	pin := "RELAY_STREAM=KUBE RELAY_CHECKPOINT_BUCKET=kube-relay-checkpoints RELAY_INDEX_BUCKET=kube-relay-index RELAY_MIRROR_BUCKET=kube-relay-mirror"
	for _, want := range []string{"using legacy stream or bucket names", pin} {
		if !r.Saw(want) {
			t.Errorf("upgraded relay's log lacks %q:\n%s", want, r.Output())
		}
	}
	msgs := readStream(ctx, t, js, event.LegacyStream)
	if len(msgs) != 4 {
		t.Errorf("legacy stream after the upgrade: got %d events, want the 3 of the initial sync and 1 change:\n%s", len(msgs), describe(msgs))
	} else if last := msgs[3]; last.Meta.Name != "cm-0" || last.Meta.Type != event.Modified || last.Meta.ResourceVersion != changed.ResourceVersion {
		t.Errorf("legacy stream's last event: got %s %s rv %s, want modified cm-0 rv %s", last.Meta.Type, last.Meta.Name, last.Meta.ResourceVersion, changed.ResourceVersion)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.Stream(sctx, event.DefaultStream(name)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("per-cluster stream %s after the upgrade: %v, want not found", event.DefaultStream(name), err)
	}

	// A relay of another cluster has nothing in KUBE or the legacy buckets: it takes the
	// per-cluster names.
	other := name + "x"
	vars["RELAY_CLUSTER"] = other
	r = startRelay(t, vars)
	r.WaitWatching(t, js, event.DefaultCheckpointBucket(other), 1)
	r.stop(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, event.DefaultStream(other))
	})
	if got := readStream(ctx, t, js, event.DefaultStream(other)); len(got) != 3 {
		t.Errorf("other cluster's stream %s: got %d events, want its initial sync of 3", event.DefaultStream(other), len(got))
	}
	if r.Saw("using legacy stream or bucket names") {
		t.Errorf("other cluster's relay adopted the legacy names:\n%s", r.Output())
	}
	vars["RELAY_CLUSTER"] = name

	// Migrating (docs/operations.md, Upgrading): with the legacy stream removed, the relay
	// creates its per-cluster stream, keeps the legacy buckets that hold its checkpoints,
	// and resumes from them, publishing only what changed since.
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	if err := js.DeleteStream(dctx, event.LegacyStream); err != nil {
		t.Fatal(err)
	}
	changed.Data["v"] = "after the migration"
	if changed, err = cms.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = startRelay(t, vars)
	resumed(t, r, js, event.LegacyCheckpointBucket, key, changed.ResourceVersion)
	r.stop(t)
	if want := "RELAY_CHECKPOINT_BUCKET=kube-relay-checkpoints RELAY_INDEX_BUCKET=kube-relay-index RELAY_MIRROR_BUCKET=kube-relay-mirror"; !r.Saw(want) {
		t.Errorf("migrated relay's log lacks the pin of the legacy buckets %q:\n%s", want, r.Output())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, event.DefaultStream(name))
	})
	if msgs := readStream(ctx, t, js, event.DefaultStream(name)); len(msgs) != 1 || msgs[0].Meta.ResourceVersion != changed.ResourceVersion {
		t.Errorf("per-cluster stream after the migration: got %d events, want only the change made since:\n%s", len(msgs), describe(msgs))
	}
}

// resumed waits until the relay r has saved the checkpoint key in bucket at rv or later, and
// fails the test at once if r exits first.
func resumed(t *testing.T, r *relayProc, js jetstream.JetStream, bucket, key, rv string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if r.Exited() {
			return false, fmt.Errorf("relay exited: %v", r.Err())
		}
		got := checkpointRV(ctx, t, js, bucket, key)
		return got != "" && rvInt(t, got) >= rvInt(t, rv), nil
	})
	if err != nil {
		t.Fatalf("waiting for checkpoint %s at %s or later: %v\n%s", key, rv, err, r.Output())
	}
}

// TestRelayThatSetSomeBucketNamesKeepsTheLegacyStream is a relay upgraded from a version
// whose default stream it used (KUBE) while it set one bucket's name: JetStream would refuse
// its per-cluster stream over KUBE's subjects, so it keeps KUBE and the legacy name of every
// other bucket it did not set, and the bucket it set as it is.
func TestRelayThatSetSomeBucketNamesKeepsTheLegacyStream(t *testing.T) {
	name := testName(t)
	js := jsClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The legacy stream is shared by the whole test bed: tests that make it remove it.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: event.LegacyStream, Subjects: []string{event.StreamSubject("kube", name)}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, event.LegacyStream)
	})
	tests := []struct {
		name                               string
		set                                Config
		stream, checkpoints, index, mirror string
	}{
		{"the mirror bucket set", Config{MirrorBucket: "mirror-" + name},
			event.LegacyStream, event.LegacyCheckpointBucket, event.LegacyIndexBucket, "mirror-" + name},
		{"the checkpoint bucket set", Config{CheckpointBucket: "checkpoints-" + name},
			event.LegacyStream, "checkpoints-" + name, event.LegacyIndexBucket, event.LegacyMirrorBucket},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.set
			cfg.Cluster, cfg.SubjectPrefix = name, "kube"
			cfg.resolveNames()
			got, err := adoptLegacyNames(ctx, js, cfg)
			if err != nil {
				t.Fatal(err)
			}
			have := []string{got.Stream, got.CheckpointBucket, got.IndexBucket, got.MirrorBucket}
			want := []string{tt.stream, tt.checkpoints, tt.index, tt.mirror}
			if !slices.Equal(have, want) {
				t.Errorf("got %v, want %v", have, want)
			}
		})
	}
}

// TestRelayDeniedTheLegacyCheckpointsLookUpRetriesInsteadOfStartingAfresh is a relay whose
// NATS user may not look up kube-relay-checkpoints, which holds this cluster's checkpoints:
// the look-up gets no answer, as a slow one, and the relay must not take new empty buckets
// (it would publish every object again and miss the deletes made while it was stopped) but
// report an error that run retries. A user who may look it up adopts the legacy buckets.
func TestRelayDeniedTheLegacyCheckpointsLookUpRetriesInsteadOfStartingAfresh(t *testing.T) {
	name := testName(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	auth := fmt.Sprintf(`authorization {
  users: [
    {user: admin, password: %[1]q}
    {user: relay, password: %[1]q, permissions: {publish: {deny: ["$JS.API.STREAM.INFO.KV_%[2]s"]}}}
  ]
}
`, "pw-"+name, event.LegacyCheckpointBucket)
	srv, err := testenv.StartNATS(ctx, env.TempDir(t), testenv.NATSOptions{Auth: auth})
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect(srv.URL(), nats.UserInfo(user, "pw-"+name))
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	admin, denied := connect("admin"), connect("relay")
	kv, err := admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: event.LegacyCheckpointBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, name+".core.configmaps._all", []byte(`{"resourceVersion":"1"}`)); err != nil {
		t.Fatal(err)
	}
	// Only the stream is set: the buckets' names are derived.
	cfg := Config{Stream: "S", Cluster: name, SubjectPrefix: "kube"}
	cfg.resolveNames()

	got, err := adoptLegacyNames(ctx, denied, cfg)
	if err == nil || !setupTransient(err) {
		t.Errorf("denied look-up: got checkpoint bucket %s and error %v, want an error that run retries", got.CheckpointBucket, err)
	}
	got, err = adoptLegacyNames(ctx, admin, cfg)
	if err != nil || got.CheckpointBucket != event.LegacyCheckpointBucket || got.IndexBucket != event.LegacyIndexBucket {
		t.Errorf("allowed look-up: got buckets %s and %s, %v; want %s and %s", got.CheckpointBucket, got.IndexBucket, err,
			event.LegacyCheckpointBucket, event.LegacyIndexBucket)
	}
}

// TestRelayThatSetItsCheckpointBucketKeepsTheLegacyIndex is a relay upgraded from a version
// in which it set its stream and checkpoint bucket but left the index and mirror buckets to
// their defaults (kube-relay-index, kube-relay-mirror): while its checkpoint bucket holds its
// cluster's checkpoints it keeps the legacy index and mirror, so that it resumes with the
// index of what it published; a relay starting afresh, or one already on per-cluster buckets,
// takes the per-cluster names.
func TestRelayThatSetItsCheckpointBucketKeepsTheLegacyIndex(t *testing.T) {
	name := testName(t)
	js := jsClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkpoints := "checkpoints-" + name
	// The legacy buckets are shared by the whole test bed: tests that make them remove them.
	for _, b := range []string{checkpoints, event.LegacyIndexBucket, event.LegacyMirrorBucket} {
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = js.DeleteKeyValue(ctx, b)
		})
	}
	kv, err := js.KeyValue(ctx, checkpoints)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, name+".core.configmaps."+name, []byte("42")); err != nil {
		t.Fatal(err)
	}
	mirrored := []string{"configmaps"}
	adopt := func(t *testing.T, cluster string) []string {
		t.Helper()
		cfg := Config{Stream: "stream-" + name, CheckpointBucket: checkpoints, Cluster: cluster, SubjectPrefix: "kube",
			MirrorList: CommaList{Items: mirrored}}
		cfg.resolveNames()
		got, err := adoptLegacyNames(ctx, js, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return []string{got.Stream, got.CheckpointBucket, got.IndexBucket, got.MirrorBucket}
	}

	t.Run("resuming keeps the legacy index and mirror", func(t *testing.T) {
		want := []string{"stream-" + name, checkpoints, event.LegacyIndexBucket, event.LegacyMirrorBucket}
		if got := adopt(t, name); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("a cluster without checkpoints takes per-cluster names", func(t *testing.T) {
		other := name + "x"
		want := []string{"stream-" + name, checkpoints, event.DefaultIndexBucket(other), event.DefaultMirrorBucket(other)}
		if got := adopt(t, other); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("a per-cluster index that exists is kept", func(t *testing.T) {
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: event.DefaultIndexBucket(name)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = js.DeleteKeyValue(ctx, event.DefaultIndexBucket(name))
		})
		want := []string{"stream-" + name, checkpoints, event.DefaultIndexBucket(name), event.LegacyMirrorBucket}
		if got := adopt(t, name); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("a relay without a mirror never looks for one", func(t *testing.T) {
		mirrored = nil
		want := []string{"stream-" + name, checkpoints, event.LegacyIndexBucket, event.DefaultMirrorBucket(name)}
		if got := adopt(t, name); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

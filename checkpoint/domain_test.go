package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
)

// leafDomain is the JetStream domain of the leaf server of startHubAndLeaf.
const leafDomain = "leaf"

// startHubAndLeaf runs a hub nats-server and a leaf node of it in domain leafDomain
// (natstest.HubAndLeaves), as a hub and one cluster's server of a fan-in, and returns a
// client connection to the hub.
func startHubAndLeaf(t *testing.T) *nats.Conn {
	t.Helper()
	hub, _ := natstest.HubAndLeaves(t, leafDomain)
	return natstest.Connect(t, hub)
}

// TestIndexAndMirrorWriteToTheirBucketInAnotherDomain is the relay of a cluster whose
// JetStream is a leaf node's domain, connected to the hub: every record must land in the
// leaf's bucket (read back by Load and a KV get), not in the hub's bucket of the same name,
// which the hand-built "$KV.<bucket>." subject would reach.
func TestIndexAndMirrorWriteToTheirBucketInAnotherDomain(t *testing.T) {
	nc := startHubAndLeaf(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hubJS, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	domainJS, err := jetstream.NewWithDomain(nc, leafDomain)
	if err != nil {
		t.Fatal(err)
	}
	prefixJS, err := jetstream.NewWithAPIPrefix(nc, "$JS."+leafDomain+".API")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		js   jetstream.JetStream
	}{
		{"through a jetstream context with the leaf's domain", domainJS},
		{"through a jetstream context with the leaf's api prefix", prefixJS},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bucket := fmt.Sprintf("index-%d", i)
			// The hub has a bucket of the same name: a write that ignores the domain lands there.
			hubKV, err := hubJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			ix, err := OpenIndex(ctx, tt.js, IndexConfig{Bucket: bucket})
			if err != nil {
				t.Fatalf("open index in the leaf's domain: %v", err)
			}
			src := "prod.core.configmaps._all"
			write(t, openJournal(ctx, t, ix, src), ix.Record(src, "default/web", "u1", "10", nil))
			if got := load(ctx, t, ix, src); got["default/web"] != "u1 10" {
				t.Errorf("load: got %v, want default/web: u1 10", got)
			}
			leafKV, err := tt.js.KeyValue(ctx, bucket)
			if err != nil {
				t.Fatal(err)
			}
			key := segmentKey(journalToken(src), 1)
			if e, err := leafKV.Get(ctx, key); err != nil || !strings.Contains(string(e.Value()), `"u1 10"`) {
				t.Errorf("get %s from the leaf's bucket: %v, want the segment recording u1 10", key, err)
			}
			if _, err := hubKV.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Errorf("get %s from the hub's bucket of the same name: %v, want key not found", key, err)
			}

			mirrorBucket := fmt.Sprintf("mirror-%d", i)
			if _, err := hubJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: mirrorBucket}); err != nil {
				t.Fatal(err)
			}
			mirror, err := OpenMirror(ctx, tt.js, MirrorConfig{Bucket: mirrorBucket})
			if err != nil {
				t.Fatalf("open mirror in the leaf's domain: %v", err)
			}
			meta := event.Meta{Cluster: "prod", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "web"}
			msg := mirror.Record(meta, []byte(`{"kind":"ConfigMap"}`))
			if ack, err := tt.js.PublishMsg(ctx, msg); err != nil || ack.Domain != leafDomain {
				t.Fatalf("mirror record on %s: ack %+v, %v; want an ack from domain %q", msg.Subject, ack, err, leafDomain)
			}
			mirrorKV, err := tt.js.KeyValue(ctx, mirrorBucket)
			if err != nil {
				t.Fatal(err)
			}
			key = event.MirrorKey(meta.Cluster, meta.GroupVersionResource().GroupResource(), meta.Namespace, meta.Name)
			if e, err := mirrorKV.Get(ctx, key); err != nil || string(e.Value()) != `{"kind":"ConfigMap"}` {
				t.Errorf("get %s from the leaf's mirror bucket: %v", key, err)
			}
		})
	}
}

// TestIndexOverAMirroredBucketWritesToItsOrigin opens the index over a hub bucket that
// mirrors a leaf's bucket, as nats.go's KeyValue does: writes go to the origin in the leaf's
// domain (the mirror's external API prefix), and come back through the mirror.
func TestIndexOverAMirroredBucketWritesToItsOrigin(t *testing.T) {
	nc := startHubAndLeaf(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hubJS, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leafJS, err := jetstream.NewWithDomain(nc, leafDomain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenIndex(ctx, leafJS, IndexConfig{Bucket: "origin"}); err != nil {
		t.Fatalf("open the origin in the leaf's domain: %v", err)
	}
	// A mirror may not write delete markers (KeyValueConfig.LimitMarkerTTL), but it may take
	// the origin's per-message TTLs: the stream nats.go's CreateKeyValue makes for a mirror,
	// with AllowMsgTTL.
	if _, err := hubJS.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_view", AllowMsgTTL: true,
		AllowRollup: true, AllowDirect: true, MirrorDirect: true, Discard: jetstream.DiscardNew, MaxMsgsPerSubject: 1,
		Mirror: &jetstream.StreamSource{Name: "KV_origin", Domain: leafDomain}}); err != nil {
		t.Fatalf("create the hub's mirror of the origin: %v", err)
	}
	ix, err := OpenIndex(ctx, hubJS, IndexConfig{Bucket: "view"})
	if err != nil {
		t.Fatalf("open the index over the mirror: %v", err)
	}
	src := "prod.core.configmaps._all"
	msg := ix.Record(src, "default/web", "u1", "10", nil)
	ack, err := hubJS.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatalf("record on %s: %v", msg.Subject, err)
	}
	if ack.Domain != leafDomain || ack.Stream != "KV_origin" {
		t.Errorf("record on %s: acked by stream %s in domain %q, want KV_origin in %q", msg.Subject, ack.Stream, ack.Domain, leafDomain)
	}
	// The mirror catches up on its own.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return load(ctx, t, ix, src)["default/web"] == "u1 10", nil
	})
	if err != nil {
		t.Errorf("load through the mirror: got %v, want default/web: u1 10", load(ctx, t, ix, src))
	}
}

package consumer_test

import (
	"context"
	"errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

func TestBootstrapTellsAMirroredResourceWithoutObjectsFromOneNotMirrored(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, _ := testStream(t, js)
	bucket := relaytest.Name(t) + "-mirror"
	// As the relays of clusters east and west write it into a bucket they share, neither
	// with a single object yet.
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Metadata: map[string]string{
		event.MirroredMetadataKey("east"): event.FormatMirrored([]string{event.MirroredToken(schema.GroupResource{Group: "", Resource: "configmaps"}), event.MirroredToken(schema.GroupResource{Group: "apps", Resource: "deployments"})}),
		event.MirroredMetadataKey("west"): event.FormatMirrored([]string{event.MirroredToken(schema.GroupResource{Group: "", Resource: "secrets"})}),
		"owner":                           "ops",
	}})
	if err != nil {
		t.Fatal(err)
	}
	const lists = "east (apps.deployments, core.configmaps); west (core.secrets)"
	tests := []struct {
		name    string
		filters []string
		err     error
	}{
		{name: "every key", filters: nil},
		{name: "mirrored resource", filters: []string{mustMirrorFilter(t, "east", schema.GroupResource{Resource: "configmaps"}, "")}},
		{name: "mirrored resource, one namespace", filters: []string{mustMirrorFilter(t, "east", schema.GroupResource{Group: "apps", Resource: "deployments"}, "ns")}},
		{name: "mirrored resources of both clusters", filters: []string{mustMirrorFilter(t, "east", schema.GroupResource{Resource: "configmaps"}, ""), mustMirrorFilter(t, "west", schema.GroupResource{Resource: "secrets"}, "")}},
		{name: "any cluster", filters: []string{mustMirrorFilter(t, "", schema.GroupResource{Resource: "secrets"}, "")}},
		{name: "any group", filters: []string{"east.*.deployments.*.*"}},
		{name: "a cluster's whole mirror", filters: []string{"west.>"}},
		{name: "resource of the other cluster", filters: []string{mustMirrorFilter(t, "west", schema.GroupResource{Resource: "configmaps"}, "")}, err: consumer.ErrNotMirrored},
		{name: "misspelled resource", filters: []string{mustMirrorFilter(t, "east", schema.GroupResource{Resource: "configmap"}, "")}, err: consumer.ErrNotMirrored},
		{name: "core group written as a group", filters: []string{mustMirrorFilter(t, "east", schema.GroupResource{Group: "apps", Resource: "configmaps"}, "")}, err: consumer.ErrNotMirrored},
		{name: "cluster without a list", filters: []string{"north.*.*.*.*"}, err: consumer.ErrNotMirrored},
		{name: "one filter of two not mirrored", filters: []string{mustMirrorFilter(t, "east", schema.GroupResource{Resource: "configmaps"}, ""), mustMirrorFilter(t, "east", schema.GroupResource{Resource: "secrets"}, "")}, err: consumer.ErrNotMirrored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := consumer.Bootstrap(ctx, js, bucket, stream, tt.filters...)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Bootstrap(%q): got error %v, want %v", tt.filters, err, tt.err)
			}
			if err != nil && !strings.Contains(err.Error(), lists) {
				t.Errorf("Bootstrap(%q): got error %q, want it to name what the bucket mirrors, %s", tt.filters, err, lists)
			}
			if err == nil && len(snap.Entries) != 0 {
				t.Errorf("Bootstrap(%q): got %d entries, want none", tt.filters, len(snap.Entries))
			}
		})
	}
}

func TestRelaysOfTwoClustersListWhatTheyMirrorInTheBucketTheyShare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := relaytest.Name(t)
	cs := bed.Kube(t)
	relaytest.CreateNamespace(t, cs, name)
	js := jsClient(t)
	bucket := name + "-mirror"
	// The bucket as an older relay left it: no list of mirrored resources, a key of the
	// operator's that stays.
	_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage, History: 1,
		LimitMarkerTTL: 15 * time.Minute, Metadata: map[string]string{"owner": "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	east, west := bed.Vars(name+"-east"), bed.Vars(name+"-west")
	for vars, mirrored := range map[*map[string]string]string{&east: "configmaps", &west: "secrets"} {
		(*vars)["RELAY_RESOURCES"] = "configmaps,secrets"
		(*vars)["RELAY_NAMESPACES"] = name
		(*vars)["RELAY_MIRROR_RESOURCES"] = mirrored
		(*vars)["RELAY_MIRROR_BUCKET"] = bucket
	}
	// Both at once: each keeps the other's list.
	pe, pw := bed.Start(t, east), bed.Start(t, west)
	pe.WaitWatching(t, js, east["RELAY_CHECKPOINT_BUCKET"], 2)
	pw.WaitWatching(t, js, west["RELAY_CHECKPOINT_BUCKET"], 2)

	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := status.Metadata()
	for key, want := range map[string]string{
		event.MirroredMetadataKey(name + "-east"): "core.configmaps",
		event.MirroredMetadataKey(name + "-west"): "core.secrets",
		"owner": "ops",
	} {
		if md[key] != want {
			t.Errorf("bucket metadata %s: got %q, want %q (all: %v)", key, md[key], want, md)
		}
	}
	// Neither cluster has an object of what it mirrors: empty snapshots, and an error for
	// what only the other cluster mirrors.
	for _, tt := range []struct {
		vars     map[string]string
		resource string
		err      error
	}{
		{east, "configmaps", nil},
		{west, "secrets", nil},
		{east, "secrets", consumer.ErrNotMirrored},
		{west, "configmaps", consumer.ErrNotMirrored},
	} {
		cluster := tt.vars["RELAY_CLUSTER"]
		snap, err := consumer.Bootstrap(ctx, js, bucket, tt.vars["RELAY_STREAM"], mustMirrorFilter(t, cluster, schema.GroupResource{Resource: tt.resource}, ""))
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) || len(snap.Entries) != 0 {
			t.Errorf("Bootstrap of %s's %s: got %d entries, error %v, want none and error %v", cluster, tt.resource, len(snap.Entries), err, tt.err)
		}
	}
	pe.Stop(t)
	pw.Stop(t)
}

package consumer_test

import (
	"context"
	"errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

func TestSnapshotEntriesCarryTheObjectsIdentity(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	bucket := relaytest.Name(t) + "-mirror"
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	values := []struct {
		group, resource, namespace, name, value string
	}{
		{"", "configmaps", "shop", "a.b", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a.b","namespace":"shop","uid":"u-a","resourceVersion":"11","creationTimestamp":"2026-12-01T00:00:00Z"},"data":{"k":"v"}}`},
		// The relay's reference for a state too large for the bucket: the identity only.
		{"", "configmaps", "shop", "big", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"shop","uid":"u-big","resourceVersion":"12"}}`},
		{"apps", "deployments", "shop", "web", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"u-web","resourceVersion":"13","creationTimestamp":"2026-12-01T00:00:00Z"},"spec":{"replicas":2}}`},
	}
	for _, v := range values {
		if _, err := kv.PutString(ctx, event.MirrorKey(cluster, schema.GroupResource{Group: v.group, Resource: v.resource}, v.namespace, v.name), v.value); err != nil {
			t.Fatal(err)
		}
	}

	snap, err := consumer.Bootstrap(ctx, js, bucket, stream, mustMirrorFilter(t, cluster, schema.GroupResource{Resource: "configmaps"}, ""))
	if err != nil {
		t.Fatalf("Bootstrap: got error %v, want nil", err)
	}
	want := []consumer.Entry{
		{Key: event.MirrorKey(cluster, schema.GroupResource{Resource: "configmaps"}, "shop", "a.b"), APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "a.b", UID: "u-a", ResourceVersion: "11"},
		{Key: event.MirrorKey(cluster, schema.GroupResource{Resource: "configmaps"}, "shop", "big"), APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "big", UID: "u-big", ResourceVersion: "12", StateOmitted: true},
	}
	if len(snap.Entries) != len(want) {
		t.Fatalf("Entries: got %d, want %d: %+v", len(snap.Entries), len(want), snap.Entries)
	}
	for i, got := range snap.Entries {
		if got.Revision == 0 || len(got.Object) == 0 {
			t.Errorf("Entries[%d]: got revision %d and %d bytes of object, want both set", i, got.Revision, len(got.Object))
		}
		got.Revision, got.Object = 0, nil
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("Entries[%d]: got %+v, want %+v", i, got, want[i])
		}
	}

	cm, err := consumer.DecodeEntry[*corev1.ConfigMap](snap.Entries[0])
	if err != nil || cm.Data["k"] != "v" {
		t.Errorf("DecodeEntry[*corev1.ConfigMap]: got %+v, %v, want data k=v, nil", cm, err)
	}
	if _, err := consumer.DecodeEntry[*corev1.ConfigMap](snap.Entries[1]); !errors.Is(err, consumer.ErrNoObject) {
		t.Errorf("DecodeEntry of an identity only: got error %v, want ErrNoObject", err)
	}
	if _, err := consumer.Objects[*corev1.ConfigMap](snap); !errors.Is(err, consumer.ErrNoObject) {
		t.Errorf("Objects with an identity only: got error %v, want ErrNoObject", err)
	}

	snap, err = consumer.Bootstrap(ctx, js, bucket, stream, mustMirrorFilter(t, cluster, schema.GroupResource{Group: "apps", Resource: "deployments"}, ""))
	if err != nil {
		t.Fatalf("Bootstrap of Deployments: got error %v, want nil", err)
	}
	ds, err := consumer.Objects[*appsv1.Deployment](snap)
	if err != nil || len(ds) != 1 || ds[0].Name != "web" || ds[0].Spec.Replicas == nil || *ds[0].Spec.Replicas != 2 {
		t.Fatalf("Objects[*appsv1.Deployment]: got %+v, %v, want web with 2 replicas", ds, err)
	}
	if _, err := consumer.Objects[*corev1.ConfigMap](snap); !errors.Is(err, consumer.ErrKindMismatch) {
		t.Errorf("Objects[*corev1.ConfigMap] of Deployments: got error %v, want ErrKindMismatch", err)
	}
}

func TestBootstrapOfAnEmptyMirrorFails(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	bucket := relaytest.Name(t) + "-mirror"
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	for _, filters := range [][]string{nil, {mustMirrorFilter(t, cluster, schema.GroupResource{Resource: "configmaps"}, "")}} {
		_, err := consumer.Bootstrap(ctx, js, bucket, stream, filters...)
		if !errors.Is(err, consumer.ErrNotMirrored) {
			t.Errorf("Bootstrap(%q) of an empty bucket: got error %v, want ErrNotMirrored", filters, err)
		}
	}
}

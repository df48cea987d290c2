package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// A service that starts late seeds its state from the mirror: uid and resourceVersion per
// object, typed objects for its work.
func ExampleObjects() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	keys, err := event.MirrorFilter("prod", schema.GroupResource{Resource: "configmaps"}, "payments")
	if err != nil {
		log.Fatal(err)
	}
	snap, err := consumer.Bootstrap(ctx, js, event.DefaultMirrorBucket("prod"), "KUBE_prod", keys)
	if errors.Is(err, consumer.ErrNotMirrored) {
		log.Fatalf("ConfigMaps are not mirrored (RELAY_MIRROR_RESOURCES): %v", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	held := map[string]string{} // uid -> resourceVersion, for the events that follow
	for _, e := range snap.Entries {
		held[e.UID] = e.ResourceVersion
	}
	cms, err := consumer.Objects[*corev1.ConfigMap](snap)
	if err != nil {
		log.Fatal(err) // an object too large for the bucket: use Entries and DecodeEntry
	}
	for _, cm := range cms {
		fmt.Println(cm.Name, len(cm.Data), "keys")
	}
	// Then follow the stream from snap.NextSequence (consumer.DeliverFromSequence).
}

func ExampleDecodeOld() {
	m := configMapMeta
	m.Kind, m.Group, m.Resource = "Deployment", "apps", "deployments"
	e := consumer.Event{
		Meta:      m,
		Object:    []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}`),
		OldObject: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2}}`),
	}
	d, err := consumer.DecodeObject[*appsv1.Deployment](e)
	if err != nil {
		fmt.Println(err)
		return
	}
	old, err := consumer.DecodeOld[*appsv1.Deployment](e)
	if err != nil {
		fmt.Println(err) // ErrNoObject when the resource's payload is not objectAndOld
		return
	}
	if d.Spec.Replicas != nil && old.Spec.Replicas != nil && *d.Spec.Replicas != *old.Spec.Replicas {
		fmt.Printf("%s: replicas %d -> %d\n", d.Name, *old.Spec.Replicas, *d.Spec.Replicas)
	}
	// A ConfigMap is not a Deployment.
	_, err = consumer.DecodeObject[*corev1.ConfigMap](e)
	fmt.Println(errors.Is(err, consumer.ErrKindMismatch))
	// Output:
	// web: replicas 2 -> 3
	// true
}

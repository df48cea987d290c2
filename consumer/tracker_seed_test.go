package consumer_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestTrackerSeededFromASnapshotAppliesOnlyWhatIsNewer is the bootstrap rule as code: the
// events that follow a snapshot from its NextSequence may repeat a state the snapshot holds;
// after Seed they are Stale, and only a newer change, or the inferred delete of a seeded
// object, applies.
func TestTrackerSeededFromASnapshotAppliesOnlyWhatIsNewer(t *testing.T) {
	ctx := context.Background()
	cm := schema.GroupResource{Resource: "configmaps"}
	snap := consumer.Snapshot{Entries: []consumer.Entry{
		{Key: event.MirrorKey("prod", cm, "shop", "a"), APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "a", UID: "a", ResourceVersion: "20"},
		{Key: event.MirrorKey("prod", cm, "shop", "b"), APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "b", UID: "b", ResourceVersion: "21"},
	}}
	tr := consumer.NewTracker(nil, 0)
	// A state the tracker already holds at a newer resourceVersion is kept.
	if _, err := tr.Observe(ctx, change{uid: "b", rv: "30", typ: event.Modified}.event()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Seed(ctx, snap); err != nil {
		t.Fatal(err)
	}
	for _, c := range []change{
		{uid: "a", rv: "19", typ: event.Modified, want: consumer.Stale}, // older than the snapshot
		{uid: "a", rv: "20", typ: event.Modified, want: consumer.Stale}, // the snapshot's own state again
		{uid: "b", rv: "30", typ: event.Modified, want: consumer.Stale}, // newer than the snapshot, already held
		{uid: "a", rv: "20", typ: event.Deleted, want: consumer.Apply},  // an inferred delete of the snapshot's state
		{uid: "c", rv: "22", typ: event.Added, want: consumer.Apply},    // an object the snapshot did not hold
		{uid: "b", rv: "31", typ: event.Modified, want: consumer.Apply}, // a newer change
	} {
		got, err := tr.Observe(ctx, c.event())
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s %s at %s after Seed: got %s, want %s", c.typ, c.uid, c.rv, got, c.want)
		}
	}
}

func TestTrackerSeedRefusesAnEntryItCannotKey(t *testing.T) {
	tr := consumer.NewTracker(nil, 0)
	for _, en := range []consumer.Entry{
		{Key: "not-a-mirror-key", APIVersion: "v1", UID: "a", ResourceVersion: "1"},
		{Key: event.MirrorKey("prod", schema.GroupResource{Resource: "configmaps"}, "ns", "a"), APIVersion: "v1", ResourceVersion: "1"},
		{Key: event.MirrorKey("prod", schema.GroupResource{Resource: "configmaps"}, "ns", "a"), APIVersion: "v1", UID: "a", ResourceVersion: "x"},
	} {
		if err := tr.Seed(context.Background(), consumer.Snapshot{Entries: []consumer.Entry{en}}); err == nil {
			t.Errorf("Seed of entry %+v: got nil error, want one", en)
		}
	}
}

// TestTrackerBlamesAnUnusableStoredStateOnTheStore is a store holding a resourceVersion that
// is not an integer: the event is valid, so the error must not read as an invalid event (a
// Handler would terminate it, and its work would be lost) but as the store's.
func TestTrackerBlamesAnUnusableStoredStateOnTheStore(t *testing.T) {
	ctx := context.Background()
	store := consumer.NewMemoryStore()
	e := change{uid: "a", rv: "10", typ: event.Modified}.event()
	if err := store.Put(ctx, consumer.KeyOf(e), consumer.TrackedState{ResourceVersion: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err := consumer.NewTracker(store, 0).Check(ctx, e)
	if err == nil || errors.Is(err, consumer.ErrInvalidResourceVersion) {
		t.Errorf("Check over a stored resourceVersion %q: got %v, want an error of the store, not ErrInvalidResourceVersion", "x", err)
	}
}

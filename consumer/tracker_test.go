package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// change is one event of a tracker test: an object (by uid), a resourceVersion and a type.
type change struct {
	uid, rv string
	typ     event.Type
	// inferred marks a delete inferred by a relist (k8s-final-state-unknown).
	inferred bool
	want     consumer.Decision
}

func (c change) event() consumer.Event {
	e := consumer.Event{Meta: event.Meta{Cluster: "prod", Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
		Namespace: "ns", Name: c.uid, UID: c.uid, ResourceVersion: c.rv, Type: c.typ, Origin: event.Live}}
	if c.inferred {
		e.Origin, e.FinalStateUnknown = event.Relist, true
	}
	return e
}

func TestTrackerAppliesEachChangeOnceInResourceVersionOrder(t *testing.T) {
	tests := []struct {
		name    string
		changes []change
	}{
		{name: "new objects and newer changes apply", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "b", rv: "11", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "12", typ: event.Modified, want: consumer.Apply},
			{uid: "a", rv: "13", typ: event.Deleted, want: consumer.Apply},
		}},
		{name: "a redelivery is stale", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Stale},
		}},
		{name: "the relay's repeat of the last change as modified is stale", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "10", typ: event.Modified, want: consumer.Stale},
		}},
		{name: "an older change arriving late is stale", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "12", typ: event.Modified, want: consumer.Apply},
			{uid: "a", rv: "11", typ: event.Modified, want: consumer.Stale},
		}},
		{name: "resourceVersions compare as integers, not strings", changes: []change{
			{uid: "a", rv: "999", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "1000", typ: event.Modified, want: consumer.Apply},
			{uid: "a", rv: "999", typ: event.Modified, want: consumer.Stale},
		}},
		{name: "an inferred delete repeating the last resourceVersion applies once", changes: []change{
			{uid: "a", rv: "213", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "213", typ: event.Deleted, inferred: true, want: consumer.Apply},
			{uid: "a", rv: "213", typ: event.Deleted, inferred: true, want: consumer.AfterDelete},
		}},
		{name: "an inferred delete of an object never seen applies", changes: []change{
			{uid: "a", rv: "213", typ: event.Deleted, inferred: true, want: consumer.Apply},
		}},
		{name: "a late copy of an earlier change does not bring a deleted object back", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "11", typ: event.Modified, want: consumer.Apply},
			{uid: "a", rv: "12", typ: event.Deleted, want: consumer.Apply},
			{uid: "a", rv: "11", typ: event.Modified, want: consumer.AfterDelete},
			{uid: "a", rv: "12", typ: event.Deleted, want: consumer.AfterDelete},
		}},
		{name: "an object that matches the selector again comes back", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "12", typ: event.Deleted, want: consumer.Apply}, // left the selection
			{uid: "a", rv: "15", typ: event.Added, want: consumer.Apply},
		}},
		{name: "a delete and re-create under the same name is another object", changes: []change{
			{uid: "a", rv: "10", typ: event.Added, want: consumer.Apply},
			{uid: "a", rv: "11", typ: event.Deleted, want: consumer.Apply},
			{uid: "b", rv: "9", typ: event.Added, want: consumer.Apply},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tr := consumer.NewTracker(nil, 0)
			for i, c := range tt.changes {
				got, err := tr.Observe(ctx, c.event())
				if err != nil {
					t.Fatalf("change %d (%s %s %s): %v", i, c.uid, c.rv, c.typ, err)
				}
				if got != c.want {
					t.Errorf("change %d (%s %s %s): got %s, want %s", i, c.uid, c.rv, c.typ, got, c.want)
				}
			}
		})
	}
}

func TestTrackerCheckRecordsNothing(t *testing.T) {
	ctx := context.Background()
	tr := consumer.NewTracker(nil, 0)
	e := change{uid: "a", rv: "10", typ: event.Added}.event()
	for range 2 {
		if d, err := tr.Check(ctx, e); err != nil || d != consumer.Apply {
			t.Fatalf("Check before Record = %s, %v; want apply", d, err)
		}
	}
	if err := tr.Record(ctx, e); err != nil {
		t.Fatal(err)
	}
	if d, err := tr.Check(ctx, e); err != nil || d != consumer.Stale {
		t.Errorf("Check after Record = %s, %v; want stale", d, err)
	}
}

// TestTrackerRecordNeverMovesAStateBackwards: two workers checked one object's changes 11 and
// 12 (both Apply) and finish in the wrong order; the late Record of 11 must not replace 12, or
// a redelivered copy of 12 would be applied twice. Nor may a late Record of a change bring a
// deleted object back.
func TestTrackerRecordNeverMovesAStateBackwards(t *testing.T) {
	ctx := context.Background()
	tr := consumer.NewTracker(nil, 0)
	older := change{uid: "a", rv: "11", typ: event.Modified}.event()
	newer := change{uid: "a", rv: "12", typ: event.Modified}.event()
	for _, e := range []consumer.Event{older, newer} {
		if d, err := tr.Check(ctx, e); err != nil || d != consumer.Apply {
			t.Fatalf("Check %s = %s, %v; want apply", e.ResourceVersion, d, err)
		}
	}
	for _, e := range []consumer.Event{newer, older} {
		if err := tr.Record(ctx, e); err != nil {
			t.Fatalf("Record %s: %v", e.ResourceVersion, err)
		}
	}
	if d, err := tr.Check(ctx, newer); err != nil || d != consumer.Stale {
		t.Errorf("Check of a copy of 12 after the late Record of 11 = %s, %v; want stale", d, err)
	}

	deleted := change{uid: "a", rv: "13", typ: event.Deleted}.event()
	if err := tr.Record(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	late := change{uid: "a", rv: "13", typ: event.Modified}.event()
	if err := tr.Record(ctx, late); err != nil {
		t.Fatal(err)
	}
	if d, err := tr.Check(ctx, newer); err != nil || d != consumer.AfterDelete {
		t.Errorf("Check of 12 after the delete and a late Record = %s, %v; want after-delete", d, err)
	}
	if err := tr.Record(ctx, change{uid: "a", rv: "x", typ: event.Modified}.event()); !errors.Is(err, consumer.ErrInvalidResourceVersion) {
		t.Errorf("Record with resourceVersion x: error %v, want ErrInvalidResourceVersion", err)
	}
}

func TestTrackerRejectsResourceVersionsThatAreNotIntegers(t *testing.T) {
	ctx := context.Background()
	tr := consumer.NewTracker(nil, 0)
	_, err := tr.Observe(ctx, change{uid: "a", rv: "abc", typ: event.Added}.event())
	if !errors.Is(err, consumer.ErrInvalidResourceVersion) {
		t.Errorf("Observe with resourceVersion abc: error %v, want ErrInvalidResourceVersion", err)
	}
}

func TestTrackerForgetsTombstonesAfterTheirTTL(t *testing.T) {
	ctx := context.Background()
	store := consumer.NewMemoryStore()
	tr := consumer.NewTracker(store, time.Hour)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	consumer.SetTrackerClock(tr, func() time.Time { return now })
	observe := func(c change) consumer.Decision {
		t.Helper()
		d, err := tr.Observe(ctx, c.event())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	observe(change{uid: "a", rv: "10", typ: event.Added})
	observe(change{uid: "a", rv: "11", typ: event.Deleted})
	observe(change{uid: "live", rv: "12", typ: event.Added})
	now = now.Add(59 * time.Minute)
	if d := observe(change{uid: "a", rv: "10", typ: event.Modified}); d != consumer.AfterDelete {
		t.Fatalf("late copy within the TTL: got %s, want after-delete", d)
	}
	now = now.Add(2 * time.Minute)
	if d, _ := tr.Check(ctx, change{uid: "a", rv: "10", typ: event.Modified}.event()); d != consumer.Apply {
		t.Errorf("a copy after the TTL: got %s, want apply (the tombstone is forgotten)", d)
	}
	observe(change{uid: "b", rv: "13", typ: event.Deleted}) // a new delete prunes the old tombstone
	if got, want := store.Len(), 2; got != want {
		t.Errorf("store holds %d states, want %d (the live object and the new tombstone)", got, want)
	}
}

func TestObjectKeyIsAKeyValueKey(t *testing.T) {
	k := consumer.ObjectKey{Cluster: "prod", Group: "", Resource: "configmaps", UID: "7cffd25b-bcf0-4ca8-9d8a-857206456fd3"}
	if got, want := k.String(), "prod.=.configmaps.7cffd25b-bcf0-4ca8-9d8a-857206456fd3"; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
	k.Group = "networking.k8s.io"
	if got, want := k.String(), "prod.networking=2Ek8s=2Eio.configmaps.7cffd25b-bcf0-4ca8-9d8a-857206456fd3"; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
}

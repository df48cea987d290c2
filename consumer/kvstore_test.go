package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

func TestKVStoreKeepsTheTrackerAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: relaytest.Name(t)})
	if err != nil {
		t.Fatal(err)
	}
	first := consumer.NewTracker(consumer.NewKVStore(kv), time.Hour)
	for _, c := range []change{
		{uid: "a", rv: "10", typ: event.Added},
		{uid: "a", rv: "11", typ: event.Modified},
		{uid: "b", rv: "12", typ: event.Added},
		{uid: "b", rv: "12", typ: event.Deleted, inferred: true},
	} {
		if d, err := first.Observe(ctx, c.event()); err != nil || d != consumer.Apply {
			t.Fatalf("first tracker, %s %s %s: got %s, %v; want apply", c.uid, c.rv, c.typ, d, err)
		}
	}

	// A new process: a new tracker over the same bucket knows what the first one applied.
	second := consumer.NewTracker(consumer.NewKVStore(kv), time.Hour)
	for _, c := range []change{
		{uid: "a", rv: "11", typ: event.Modified, want: consumer.Stale},
		{uid: "a", rv: "12", typ: event.Modified, want: consumer.Apply},
		{uid: "b", rv: "12", typ: event.Added, want: consumer.AfterDelete},
		{uid: "c", rv: "13", typ: event.Added, want: consumer.Apply},
	} {
		if d, err := second.Check(ctx, c.event()); err != nil || d != c.want {
			t.Errorf("second tracker, %s %s %s: got %s, %v; want %s", c.uid, c.rv, c.typ, d, err, c.want)
		}
	}
}

func TestKVStorePrunesOnlyTombstonesOlderThanTheTime(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: relaytest.Name(t)})
	if err != nil {
		t.Fatal(err)
	}
	store := consumer.NewKVStore(kv)
	tr := consumer.NewTracker(store, time.Hour)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	consumer.SetTrackerClock(tr, func() time.Time { return now })
	for _, c := range []change{
		{uid: "old", rv: "10", typ: event.Deleted},
		{uid: "live", rv: "11", typ: event.Added},
	} {
		if _, err := tr.Observe(ctx, c.event()); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Hour)
	if _, err := tr.Observe(ctx, change{uid: "new", rv: "12", typ: event.Deleted}.event()); err != nil {
		t.Fatal(err)
	}

	n, err := store.PruneTombstones(ctx, now.Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PruneTombstones: got %d, %v; want 1 pruned", n, err)
	}
	for uid, want := range map[string]bool{"old": false, "live": true, "new": true} {
		_, ok, err := store.Get(ctx, consumer.KeyOf(change{uid: uid, rv: "1"}.event()))
		if err != nil || ok != want {
			t.Errorf("after pruning, state of %s: stored %v, %v; want %v", uid, ok, err, want)
		}
	}
}

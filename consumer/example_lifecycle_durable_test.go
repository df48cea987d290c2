package consumer_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// syncConfig says what a service follows and where.
type syncConfig struct {
	Cluster, Stream, Bucket, Durable string
	Resources                        []schema.GroupResource // "" group: the core group
}

// objectState is what the service keeps of one object.
type objectState struct {
	Namespace, Name string
}

// objectStore is the service's durable state: the objects it knows by uid, the stream
// sequence its snapshot was taken at (0: never bootstrapped), and the Tracker that says
// which events to apply. A real service keeps them in a database or a file (the Tracker
// with a TrackerStore there) and writes each change before acknowledging the event; this
// one stands in for it in memory.
type objectStore struct {
	mu      sync.Mutex
	start   uint64
	objects map[string]objectState
	tracker *consumer.Tracker
}

func newObjectStore() *objectStore {
	return &objectStore{objects: map[string]objectState{}, tracker: consumer.NewTracker(nil, 0)}
}

// apply upserts (or deletes) an object by uid.
func (s *objectStore) apply(uid, namespace, name string, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted {
		delete(s.objects, uid)
		return
	}
	s.objects[uid] = objectState{Namespace: namespace, Name: name}
}

// handle applies one event the tracker says is newer than what the store holds, records
// it, then acknowledges it.
func (s *objectStore) handle(msg jetstream.Msg) {
	ctx := context.Background()
	e, err := consumer.Decode(msg)
	if err != nil {
		_ = msg.Term() // not a relay event
		return
	}
	d, err := s.tracker.Check(ctx, e)
	if errors.Is(err, consumer.ErrInvalidResourceVersion) {
		_ = msg.Term() // no resourceVersion to order it by: it can never be applied
		return
	}
	if err != nil {
		_ = msg.Nak() // the tracker's store failed: deliver it again
		return
	}
	if d == consumer.Apply {
		s.apply(e.UID, e.Namespace, e.Name, e.Type == event.Deleted)
		if err := s.tracker.Record(ctx, e); err != nil {
			_ = msg.Nak()
			return
		}
	}
	_ = msg.Ack() // after the state is stored
}

// startSync bootstraps the store on the service's first start, and creates or binds its
// durable consumer from the snapshot's position on every start. Several resources share
// one durable with one filter each; for one durable per resource, call it once per
// resource, with a Durable name and a store of each.
func startSync(ctx context.Context, js jetstream.JetStream, cfg syncConfig, store *objectStore) (consumer.DurableConsumer, error) {
	var keys []string
	var filters []event.Filter
	for _, gr := range cfg.Resources {
		key, err := event.MirrorFilter(cfg.Cluster, gr, "")
		if err != nil {
			return consumer.DurableConsumer{}, err
		}
		keys = append(keys, key)
		filters = append(filters, consumer.ResourceFilter("kube", cfg.Cluster, gr))
	}
	if store.start == 0 { // first start: bootstrap once
		snap, err := consumer.Bootstrap(ctx, js, cfg.Bucket, cfg.Stream, keys...)
		if err != nil {
			return consumer.DurableConsumer{}, err
		}
		for _, en := range snap.Entries {
			store.apply(en.UID, en.Namespace, en.Name, false)
		}
		if err := store.tracker.Seed(ctx, snap); err != nil {
			return consumer.DurableConsumer{}, err
		}
		store.start = snap.NextSequence // stored with the snapshot, in the same write
	}
	subjects, err := consumer.Subjects(filters...)
	if err != nil {
		return consumer.DurableConsumer{}, err
	}
	// The same start on every start: Durable binds the consumer if it belongs to this
	// state, and fails with ErrConsumerConflict if it does not.
	return consumer.Durable(ctx, js, cfg.Stream, cfg.Durable, subjects, consumer.DeliverFromSequence(store.start))
}

// A service that keeps the ConfigMaps and Secrets of cluster prod in its own durable store:
// it bootstraps from the state mirror once, on its first start, and on every restart binds
// its durable consumer, which resumes after the last event it acknowledged.
func Example_bootstrapOnceWithDurableState() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	store := newObjectStore() // a real service opens its database here
	cons, err := startSync(ctx, js, syncConfig{
		Cluster: "prod", Stream: "KUBE_prod", Bucket: "kube-relay-mirror-prod", Durable: "inventory",
		Resources: []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}},
	}, store)
	if errors.Is(err, consumer.ErrConsumerConflict) {
		log.Fatalf("the consumer does not belong to this store: %v", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("consumer created: %t (false: a restart)", cons.Created)
	cc, err := cons.Consume(store.handle)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	<-ctx.Done()
}

package consumer_test

import (
	"context"
	"fmt"
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

// cachedObject is what the cache holds of one ConfigMap.
type cachedObject struct {
	Namespace, Name string
}

// configMapCache holds the ConfigMaps of a cluster in memory, by uid, with the Tracker that
// says which events to apply. Both are lost with the process, so they are rebuilt on every
// start.
type configMapCache struct {
	mu      sync.Mutex
	objects map[string]cachedObject
	tracker *consumer.Tracker
}

// apply applies one event the tracker said to apply: an upsert, or a delete.
func (c *configMapCache) apply(e consumer.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Type == event.Deleted {
		delete(c.objects, e.UID)
		return
	}
	c.objects[e.UID] = cachedObject{Namespace: e.Namespace, Name: e.Name}
}

// followConfigMaps fills a new cache from the state mirror and keeps it current with an
// ordered consumer from the snapshot's position: no state on the server, no acks, nothing
// to clean up when the process dies. Stop the returned ConsumeContext to stop following.
func followConfigMaps(ctx context.Context, js jetstream.JetStream, cluster, stream, bucket string) (*configMapCache, jetstream.ConsumeContext, error) {
	keys, err := event.MirrorFilter(cluster, schema.GroupResource{Resource: "configmaps"}, "")
	if err != nil {
		return nil, nil, err
	}
	snap, err := consumer.Bootstrap(ctx, js, bucket, stream, keys)
	if err != nil {
		return nil, nil, err
	}
	cache := &configMapCache{objects: map[string]cachedObject{}, tracker: consumer.NewTracker(nil, 0)}
	for _, en := range snap.Entries {
		cache.objects[en.UID] = cachedObject{Namespace: en.Namespace, Name: en.Name}
	}
	if err := cache.tracker.Seed(ctx, snap); err != nil {
		return nil, nil, err
	}
	subjects, err := consumer.Subjects(consumer.ResourceFilter("kube", cluster, schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		return nil, nil, err
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: subjects,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    snap.NextSequence,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("follow %s from %d: %w", stream, snap.NextSequence, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		e, err := consumer.Decode(msg)
		if err != nil {
			log.Printf("not a relay event: %v", err)
			return
		}
		// Observe records the event as it decides: the tracker and the cache live and die
		// together, and applying to the cache cannot fail.
		d, err := cache.tracker.Observe(ctx, e)
		if err != nil {
			log.Print(err)
			return
		}
		if d == consumer.Apply {
			cache.apply(e)
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("follow %s: %w", stream, err)
	}
	return cache, cc, nil
}

// A service that keeps the ConfigMaps of cluster prod in memory bootstraps from the state
// mirror on every start and follows with an ordered consumer. A durable consumer would
// resume after what the previous process acknowledged, which the new process no longer holds.
func Example_bootstrapOnEveryStartInMemory() {
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
	cache, cc, err := followConfigMaps(ctx, js, "prod", "KUBE_prod", "kube-relay-mirror-prod")
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	cache.mu.Lock()
	log.Printf("following %d ConfigMaps", len(cache.objects))
	cache.mu.Unlock()
	<-ctx.Done()
}

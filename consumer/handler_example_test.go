package consumer_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// A service that keeps the live ConfigMaps of cluster prod, each change applied once and in
// order, its tracker in a key-value bucket so that a restart resumes where it stopped.
func ExampleHandler() {
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
	subjects, err := consumer.Subjects(consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		log.Fatal(err)
	}
	cons, err := consumer.Durable(ctx, js, "KUBE_prod", "configmaps", subjects, consumer.MaxAckPending(1))
	if err != nil {
		log.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "configmaps-tracker"})
	if err != nil {
		log.Fatal(err)
	}
	tracker := consumer.NewTracker(consumer.NewKVStore(kv), 0)

	handler, err := consumer.Handler(ctx, func(ctx context.Context, e consumer.Event) error {
		// Called once per change of an object, in resourceVersion order: not for a
		// redelivery, a replay or a late copy. An error has it delivered again later.
		if e.Type == event.Deleted {
			fmt.Println("forget", e.Namespace, e.Name)
			return nil
		}
		fmt.Println("store", e.Namespace, e.Name, "at", e.ResourceVersion)
		return nil
	}, consumer.TrackWith(tracker), consumer.OnError(func(msg jetstream.Msg, err error) {
		log.Printf("%s: %v", msg.Subject(), err)
	}))
	if err != nil {
		log.Fatal(err)
	}
	cc, err := cons.Consume(handler)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	<-ctx.Done()
}

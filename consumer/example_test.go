package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func ExampleDecodeObject() {
	// A message as the relay publishes it (here built in place of one received).
	msg := relayMsg("kube", configMapMeta, configMapBody)

	e, err := consumer.DecodeMsg(msg)
	if err != nil {
		fmt.Println(err)
		return
	}
	cm, err := consumer.DecodeObject[*corev1.ConfigMap](e)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Type, e.GroupVersionResource().Resource, e.Namespace+"/"+e.Name, e.ResourceVersion, e.Origin)
	fmt.Println(len(cm.Data["ca.crt"]), "byte of ca.crt")
	// Output:
	// modified configmaps kube-system/kube-root-ca.crt 215 live
	// 1 byte of ca.crt
}

func ExampleResourceFilter() {
	deletes := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Group: "apps", Resource: "deployments"})
	deletes.Type = event.Deleted
	configMaps := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "configmaps"})
	configMaps.Namespace = "kube-system"
	subjects, err := consumer.Subjects(deletes, configMaps)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range subjects {
		fmt.Println(s)
	}
	// Output:
	// kube.prod.apps.*.deployments.*.*.deleted
	// kube.prod.core.*.configmaps.kube-system.*.*
}

// Every Deployment change of cluster prod, through a durable consumer that resumes where the
// service stopped.
func ExampleDurable() {
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
	filters, err := consumer.Subjects(consumer.ResourceFilter("kube", "prod", schema.GroupResource{Group: "apps", Resource: "deployments"}))
	if err != nil {
		log.Fatal(err)
	}
	// The relay's default stream for cluster prod: KUBE_prod.
	cons, err := consumer.Durable(ctx, js, event.DefaultStream("prod"), "deploywatch", filters)
	if err != nil {
		log.Fatal(err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		e, err := consumer.Decode(msg)
		if err != nil {
			log.Printf("not a relay event: %v", err)
			_ = msg.Term() // redelivering it would not help
			return
		}
		// e.ID() is the same for every copy of this change: skip it if already handled.
		d, err := consumer.DecodeObject[*appsv1.Deployment](e)
		switch {
		case errors.Is(err, consumer.ErrNoObject):
			log.Printf("%s %s/%s: %v; read it from the API server if needed", e.Type, e.Namespace, e.Name, err)
		case err != nil:
			log.Printf("decode %s: %v", msg.Subject(), err)
			_ = msg.Term()
			return
		case e.FinalStateUnknown:
			log.Printf("deleted %s/%s while the relay could not watch", e.Namespace, e.Name)
		default:
			log.Printf("%s %s/%s rv %s: %d replicas wanted", e.Type, e.Namespace, e.Name, e.ResourceVersion, *d.Spec.Replicas)
		}
		_ = msg.Ack() // after the work is done
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
	<-ctx.Done()
}

func ExampleSubjectsAcross() {
	// Deployment deletes and every ConfigMap event of clusters east and west, for a consumer
	// of an aggregate stream that holds more clusters.
	deletes := consumer.ResourceFilter("kube", "", schema.GroupResource{Group: "apps", Resource: "deployments"})
	deletes.Type = event.Deleted
	configMaps := consumer.ResourceFilter("kube", "", schema.GroupResource{Resource: "configmaps"})
	subjects, err := consumer.SubjectsAcross([]string{"east", "west"}, deletes, configMaps)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range subjects {
		fmt.Println(s)
	}
	// Output:
	// kube.east.apps.*.deployments.*.*.deleted
	// kube.west.apps.*.deployments.*.*.deleted
	// kube.east.core.*.configmaps.*.*.*
	// kube.west.core.*.configmaps.*.*.*
}

// On the hub of a fan-in topology, one stream with the events of clusters east and west, each
// relay publishing to its own leaf node in the JetStream domain named after its cluster; then
// a durable consumer of west's ConfigMap events.
func ExampleEnsureAggregate() {
	ctx := context.Background()
	nc, err := nats.Connect(os.Getenv("NATS_URL")) // the hub
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	_, err = consumer.EnsureAggregate(ctx, js, consumer.Aggregate{
		Name: "KUBE_ALL",
		Sources: []consumer.ClusterStream{
			{Cluster: "east", Domain: "east"}, // stream KUBE_east, the relay's default
			{Cluster: "west", Domain: "west"},
		},
		MaxAge: 7 * 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	subjects, err := consumer.SubjectsAcross([]string{"west"},
		consumer.ResourceFilter("kube", "", schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		log.Fatal(err)
	}
	cons, err := consumer.Durable(ctx, js, "KUBE_ALL", "west-configmaps", subjects)
	if err != nil {
		log.Fatal(err)
	}
	_ = cons // consume as in the Durable example; e.Cluster says whose event it is
}

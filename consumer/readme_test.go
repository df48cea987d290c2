package consumer_test

import (
	"context"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// The README's Go snippets, verbatim between the "README snippet" markers, so that the
// compiler checks them; TestREADMEGoSnippetsCompile checks that the README shows exactly
// these. What follows a snippet's end marker only uses the variables it declares.

func readmeFollowDeployments(ctx context.Context, js jetstream.JetStream) {
	// README snippet begin
	subjects, err := consumer.Subjects(consumer.ResourceFilter("kube", "prod",
		schema.GroupResource{Group: "apps", Resource: "deployments"}))
	// Created on the first start; bound, at its position, on every later one.
	cons, err := consumer.Durable(ctx, js, "KUBE_prod", "deploywatch", subjects)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		e, err := consumer.Decode(msg)
		if err != nil {
			_ = msg.Term() // not a relay event
			return
		}
		if d, err := consumer.DecodeObject[*appsv1.Deployment](e); err == nil && d.Spec.Replicas != nil {
			log.Printf("%s %s/%s: %d replicas", e.Type, e.Namespace, e.Name, *d.Spec.Replicas)
		}
		// ... handle it (a consumer.Tracker skips what is not newer: see consumer.Handler), then:
		_ = msg.Ack()
	})
	// README snippet end
	_, _ = cc, err
}

func readmeBootstrap(ctx context.Context, js jetstream.JetStream) {
	// README snippet begin
	// First start: the current state of every ConfigMap, then every change after it.
	configMapGR := schema.GroupResource{Resource: "configmaps"} // "" is the core group
	keys, err := event.MirrorFilter("prod", configMapGR, "")
	snap, err := consumer.Bootstrap(ctx, js, "kube-relay-mirror-prod", "KUBE_prod", keys)
	configMaps, err := consumer.Subjects(consumer.ResourceFilter("kube", "prod", configMapGR)) // the same resource as the snapshot
	cons, err := consumer.Durable(ctx, js, "KUBE_prod", "configmap-sync", configMaps,
		consumer.DeliverFromSequence(snap.NextSequence))
	// README snippet end
	_, _ = cons, err
}

func readmeAggregate(ctx context.Context, hub jetstream.JetStream) {
	// README snippet begin
	_, err := consumer.EnsureAggregate(ctx, hub, consumer.Aggregate{Name: "KUBE_ALL",
		Sources: []consumer.ClusterStream{{Cluster: "east", Domain: "east"}, {Cluster: "west", Domain: "west"}}})
	subjects, err := consumer.SubjectsAcross([]string{"west"}, consumer.ResourceFilter("kube", "",
		schema.GroupResource{Resource: "configmaps"})) // kube.west.core.*.configmaps.*.*.*
	cons, err := consumer.Durable(ctx, hub, "KUBE_ALL", "west-configmaps", subjects)
	// README snippet end
	_, _ = cons, err
}

func readmePartitioned(ctx context.Context, js jetstream.JetStream, handle consumer.HandlerFunc, tracker *consumer.Tracker, ordinal int) {
	// README snippet begin
	// The deployment step, once: a new group says where to start (ReplayAll, or StartSequence).
	_, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{
		Name: "CONFIGMAP_AUDIT", Source: "KUBE_prod", Partitions: 12, ReplayAll: true})
	// On shutdown (ctx ends) the event in hand is cancelled and naked: another replica takes it.
	handler, err := consumer.Handler(ctx, handle, consumer.TrackWith(tracker))
	// Replica <ordinal> of 3: first choice for partitions ordinal, ordinal+3, ...; standby for the rest.
	err = consumer.JoinPartitioned(ctx, js, "CONFIGMAP_AUDIT", handler, consumer.AsMember(ordinal, 3))
	// README snippet end
	_ = err
}

var (
	// readmeGoBlock matches a Go code block of the README, indented as in a list item.
	readmeGoBlock = regexp.MustCompile("(?ms)^( *)```go\n(.*?)^ *```\n")
	// snippetBlock matches a snippet between the markers of this file.
	snippetBlock = regexp.MustCompile(`(?s)\t// README snippet begin\n(.*?)\t// README snippet end\n`)
)

// dedent removes prefix from the start of every line of s that has it.
func dedent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "")
}

func TestREADMEGoSnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var compiled []string
	for _, m := range snippetBlock.FindAllStringSubmatch(string(self), -1) {
		compiled = append(compiled, dedent(m[1], "\t"))
	}
	var shown []string
	for _, m := range readmeGoBlock.FindAllStringSubmatch(string(readme), -1) {
		shown = append(shown, dedent(m[2], m[1]))
	}
	if len(shown) == 0 || len(shown) != len(compiled) {
		t.Fatalf("got %d Go snippets in README.md and %d compiled here, want the same number (at least one)", len(shown), len(compiled))
	}
	for i := range shown {
		if shown[i] != compiled[i] {
			t.Errorf("README.md Go snippet %d:\n%s\nwant it as compiled in readme_test.go:\n%s", i+1, shown[i], compiled[i])
		}
	}
}

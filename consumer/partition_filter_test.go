package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestAFilteredGroupTakesOnlyItsObjectsEachInOnePartition has a group over one resource of
// every namespace and one namespace of another: it stores their events, derived ones
// included, each object in one partition, and nothing else.
func TestAFilteredGroupTakesOnlyItsObjectsEachInOnePartition(t *testing.T) {
	const partitions = 3
	ctx := context.Background()
	js := jsClient(t)
	source, cluster := testStream(t, js)
	group := source + "_GROUP"
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{
		Name: group, Source: source, Partitions: partitions, ReplayAll: true,
		Filters: []event.Filter{{Resource: "configmaps"}, {Resource: "secrets", Namespace: "ns-1"}},
	}); err != nil {
		t.Fatal(err)
	}
	wanted := 0
	for i := range 12 {
		for _, resource := range []string{"configmaps", "secrets", "pods"} {
			namespace := fmt.Sprintf("ns-%d", i%3)
			for _, typ := range []event.Type{event.Added, event.Modified} {
				m := event.Meta{Cluster: cluster, Version: "v1", Resource: resource, Namespace: namespace, Name: fmt.Sprintf("obj-%d", i), Type: typ}
				subject := m.Subject("kube").String()
				subjects := []string{subject, strings.TrimSuffix(subject, "."+string(typ)) + ".derived.ready"}
				for _, s := range subjects {
					if _, err := js.Publish(ctx, s, nil); err != nil {
						t.Fatalf("publish %s: %v", s, err)
					}
					if resource == "configmaps" || resource == "secrets" && namespace == "ns-1" {
						wanted++
					}
				}
			}
		}
	}
	// A last event the group takes: once it is stored, every earlier one was sourced.
	last := event.Meta{Cluster: cluster, Version: "v1", Resource: "configmaps", Namespace: "ns-0", Name: "last", Type: event.Added}
	if _, err := js.Publish(ctx, last.Subject("kube").String(), nil); err != nil {
		t.Fatal(err)
	}
	wanted++
	s, err := js.Stream(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	waitStored(t, s, uint64(wanted))
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(wanted) {
		t.Errorf("group stream: got %d events, want %d: the filtered ones only", info.State.Msgs, wanted)
	}
	partitionOf := make(map[string]string)
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		part, original, _ := strings.Cut(m.Subject, ".")
		toks := strings.Split(original, ".")
		if len(toks) < 8 {
			t.Fatalf("message %d: subject %q after the partition token: too short", seq, original)
		}
		resource, namespace := toks[4], toks[5]
		if resource == "pods" || resource == "secrets" && namespace != "ns-1" {
			t.Errorf("message %d: %s in the group, want only its filters' events", seq, original)
		}
		key := strings.Join(toks[1:7], ".")
		if p, ok := partitionOf[key]; ok && p != part {
			t.Errorf("%s: events in partitions %s and %s, want one", key, p, part)
		}
		partitionOf[key] = part
	}
	// Another filter over the same group is another group.
	_, err = consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: group, Source: source, Partitions: partitions})
	if err == nil || !strings.Contains(err.Error(), "filters") {
		t.Errorf("the group without its filters: got %v, want ErrNotPartitioned naming the filters", err)
	}
}

func TestEnsurePartitionedRefusesFiltersOfOneObjectOrType(t *testing.T) {
	_, err := consumer.EnsurePartitioned(context.Background(), nil, consumer.PartitionConfig{
		Name: "G", Source: "S", Partitions: 2, ReplayAll: true,
		Filters: []event.Filter{{Name: "one"}, {Type: event.Deleted}, {Prefix: "other"}},
	})
	for _, w := range []string{`filter 0: name "one"`, `filter 1: name "", type "deleted"`, `filter 2: prefix "other"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v: want it to contain %q", err, w)
		}
	}
}

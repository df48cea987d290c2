package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestEnsurePartitionedRefusesInvalidConfigNamingEachProblem(t *testing.T) {
	tests := []struct {
		name string
		cfg  consumer.PartitionConfig
		want []string
	}{
		{name: "nothing set", cfg: consumer.PartitionConfig{},
			want: []string{"name: empty", "source: empty", "partitions 0: want 1 to 256"}},
		{name: "too many partitions and negative settings",
			cfg:  consumer.PartitionConfig{Name: "G", Source: "S", Partitions: 257, AckWait: -time.Second, Replicas: -1},
			want: []string{"partitions 257", "ack wait -1s", "replicas -1"}},
		{name: "names the server refuses",
			cfg:  consumer.PartitionConfig{Name: "a.b", Source: "s p", Partitions: 1},
			want: []string{`name: "a.b"`, `source: "s p"`}},
		{name: "the group is its own source", cfg: consumer.PartitionConfig{Name: "S", Source: "S", Partitions: 2},
			want: []string{`name "S": the same as the source`}},
		{name: "invalid prefix", cfg: consumer.PartitionConfig{Name: "G", Source: "S", Prefix: "a..b", Partitions: 2},
			want: []string{"prefix:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Validation comes first: no JetStream is needed to refuse.
			_, err := consumer.EnsurePartitioned(context.Background(), nil, tt.cfg)
			if err == nil {
				t.Fatal("got nil error, want one")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q: want it to contain %q", err, w)
				}
			}
		})
	}
}

// partitionedGroup creates a group of n partitions over the test's stream.
func partitionedGroup(t *testing.T, js jetstream.JetStream, source string, n int) string {
	t.Helper()
	group := source + "_GROUP"
	_, err := consumer.EnsurePartitioned(context.Background(), js, consumer.PartitionConfig{
		Name: group, Source: source, Partitions: n, ReplayAll: true,
	})
	if err != nil {
		t.Fatalf("EnsurePartitioned: %v", err)
	}
	return group
}

// TestPartitionOfAnEventDependsOnlyOnItsNamespaceAndName publishes every type of event, and a
// derived event, for objects of odd and long names in two resources, and reads where the
// group's stream stored each: one partition per namespace and name, every partition used.
func TestPartitionOfAnEventDependsOnlyOnItsNamespaceAndName(t *testing.T) {
	const partitions = 4
	ctx := context.Background()
	js := jsClient(t)
	source, cluster := testStream(t, js)
	group := partitionedGroup(t, js, source, partitions)

	// Objects of odd names (long enough for the hashed form, bytes that are escaped), each
	// in two resources, each with every type and a derived event.
	objects := []struct{ namespace, name string }{{"", "node-a"}, {"ns", strings.Repeat("long-", 100)}}
	for _, n := range unusualNames {
		objects = append(objects, struct{ namespace, name string }{"ns", n})
	}
	for i := range 20 {
		objects = append(objects, struct{ namespace, name string }{fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("obj-%d", i)})
	}
	want := 0
	for _, o := range objects {
		for _, resource := range []string{"configmaps", "secrets"} {
			for _, typ := range []event.Type{event.Added, event.Modified, event.Deleted} {
				m := event.Meta{Cluster: cluster, Version: "v1", Resource: resource, Namespace: o.namespace, Name: o.name, Type: typ}
				subject := m.Subject("kube").String()
				subjects := []string{subject}
				if typ == event.Modified {
					subjects = append(subjects, strings.TrimSuffix(subject, ".modified")+".derived.ready")
				}
				for _, s := range subjects {
					if _, err := js.Publish(ctx, s, nil); err != nil {
						t.Fatalf("publish %s: %v", s, err)
					}
					want++
				}
			}
		}
	}
	s, err := js.Stream(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	waitStored(t, s, uint64(want))

	partitionOf := make(map[string]string) // namespace/name -> partition token
	used := make(map[string]bool)
	for seq := uint64(1); seq <= uint64(want); seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		part, original, _ := strings.Cut(m.Subject, ".")
		sub, err := event.ParseSubject("kube", original)
		if err != nil && strings.HasSuffix(original, ".derived.ready") {
			sub, err = event.ParseSubject("kube", strings.TrimSuffix(original, ".derived.ready")+".modified")
		}
		if err != nil {
			t.Fatalf("message %d: subject %q after the partition token: %v", seq, original, err)
		}
		if sub.Cluster != cluster {
			t.Fatalf("message %d: cluster %q, want %q", seq, sub.Cluster, cluster)
		}
		key := sub.Namespace + "/" + sub.Name
		if sub.Digests.Name != "" {
			key += "#" + sub.Digests.Name
		}
		if p, ok := partitionOf[key]; ok && p != part {
			t.Errorf("%s: events in partitions %s and %s (%s), want one partition for every event of a namespace and name", key, p, part, original)
		}
		partitionOf[key] = part
		used[part] = true
	}
	if len(partitionOf) != len(objects) {
		t.Errorf("got %d objects in the group's stream, want %d", len(partitionOf), len(objects))
	}
	if len(used) != partitions {
		t.Errorf("%d objects spread over partitions %v, want all %d used", len(objects), used, partitions)
	}
}

func TestEnsurePartitionedRefusesAnotherPartitionCount(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	source, _ := testStream(t, js)
	group := partitionedGroup(t, js, source, 3)
	// The same group again: bound, and a changed AckWait applied.
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: group, Source: source, Partitions: 3, AckWait: time.Minute}); err != nil {
		t.Fatalf("EnsurePartitioned again: %v", err)
	}
	cons, err := js.Consumer(ctx, group, "partition-2")
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.AckWait; got != time.Minute {
		t.Errorf("ack wait after EnsurePartitioned with 1m: got %s", got)
	}
	_, err = consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: group, Source: source, Partitions: 4})
	if !errors.Is(err, consumer.ErrNotPartitioned) || !strings.Contains(err.Error(), `partitions "3", want "4"`) {
		t.Errorf("4 partitions over a group of 3: got %v, want ErrNotPartitioned naming the counts", err)
	}
	err = consumer.JoinPartitioned(ctx, js, source, func(jetstream.Msg) {})
	if !errors.Is(err, consumer.ErrNotPartitioned) {
		t.Errorf("JoinPartitioned on the relay's stream: got %v, want ErrNotPartitioned", err)
	}
}

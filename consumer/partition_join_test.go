package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestJoinPartitionedRefusesInvalidOptions(t *testing.T) {
	handler := func(jetstream.Msg) {}
	tests := []struct {
		name    string
		group   string
		handler jetstream.MessageHandler
		opts    []consumer.JoinOption
		want    string
	}{
		{name: "index past the members", group: "G", handler: handler, opts: []consumer.JoinOption{consumer.AsMember(3, 3)}, want: "member 3 of 3"},
		{name: "no members", group: "G", handler: handler, opts: []consumer.JoinOption{consumer.AsMember(0, 0)}, want: "member 0 of 0"},
		{name: "negative index", group: "G", handler: handler, opts: []consumer.JoinOption{consumer.AsMember(-1, 2)}, want: "member -1 of 2"},
		{name: "nil handler", group: "G", want: "nil handler"},
		{name: "empty group", handler: handler, want: "group: empty"},
		{name: "nil error function", group: "G", handler: handler, opts: []consumer.JoinOption{consumer.OnConsumeError(nil)}, want: "nil consume error function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := consumer.JoinPartitioned(context.Background(), nil, tt.group, tt.handler, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestMemberPriorityGivesEachPartitionOneFirstChoiceAndSpreadsStandbys(t *testing.T) {
	for members := 1; members <= 12; members++ {
		for partitions := 1; partitions <= 24; partitions++ {
			nextChoices := make(map[int]map[int]bool) // first choice -> the members next after it
			for p := range partitions {
				first, next, seen := -1, -1, map[int]bool{}
				for m := range members {
					prio := consumer.MemberPriority(m, members, p)
					if prio < 0 || prio > 9 {
						t.Fatalf("%d members, partition %d: member %d priority %d, want 0 to 9", members, p, m, prio)
					}
					if prio == 0 {
						if first >= 0 {
							t.Fatalf("%d members, partition %d: members %d and %d both first choice", members, p, first, m)
						}
						first = m
					}
					if members <= 10 && seen[prio] {
						t.Fatalf("%d members, partition %d: priority %d given twice", members, p, prio)
					}
					seen[prio] = true
					if prio == 1 {
						next = m
					}
				}
				if first != p%members {
					t.Fatalf("%d members, partition %d: first choice %d, want %d", members, p, first, p%members)
				}
				if nextChoices[first] == nil {
					nextChoices[first] = map[int]bool{}
				}
				nextChoices[first][next] = true
			}
			// A member of two partitions or more has them taken over by different members
			// when it is gone, when there are two others or more.
			if members >= 3 && partitions >= 2*members {
				for m, next := range nextChoices {
					if len(next) < 2 {
						t.Errorf("%d members, %d partitions: member %d's partitions all go to %v", members, partitions, m, next)
					}
				}
			}
		}
	}
}

// delivery is one event as a member of a partitioned group received it.
type delivery struct {
	member, partition int
	e                 consumer.Event
}

// TestPartitionedMembersShareObjectsDisjointlyAndHandleEveryEventOnce runs three members, each
// on a connection of its own, and checks that each event went to one member, the first choice
// of its partition, so that every object's events went to one member, in order, and every
// member had a share.
func TestPartitionedMembersShareObjectsDisjointlyAndHandleEveryEventOnce(t *testing.T) {
	const (
		members    = 3
		partitions = 6
		objects    = 30
	)
	ctx, cancel := context.WithCancel(context.Background())
	js := jsClient(t)
	source, cluster := testStream(t, js)
	group := partitionedGroup(t, js, source, partitions)

	got := make(chan delivery, 3*objects)
	done := make(chan error, members)
	for m := range members {
		h, err := consumer.Handler(ctx, func(_ context.Context, e consumer.Event) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		record := func(msg jetstream.Msg) {
			p, ok := consumer.PartitionOf(msg)
			e, err := consumer.Decode(msg)
			if !ok || err != nil {
				t.Errorf("member %d: message on %s: partition %d %v, decode error %v", m, msg.Subject(), p, ok, err)
			}
			h(msg)
			got <- delivery{member: m, partition: p, e: e}
		}
		mjs := jsClient(t) // a connection of its own, as a process would have
		go func() { done <- consumer.JoinPartitioned(ctx, mjs, group, record, consumer.AsMember(m, members)) }()
	}
	// Every member waits on every partition before the first event, so that each event goes
	// to its partition's first choice.
	for p := range partitions {
		cons, err := js.Consumer(ctx, group, fmt.Sprintf("partition-%d", p))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("%d members pulling partition %d", members, p), func() bool {
			info, err := cons.Info(ctx)
			return err == nil && info.NumWaiting == members
		})
	}

	for i := range objects {
		m := objectMeta(cluster, "configmaps", "ConfigMap", i)
		m.Namespace = fmt.Sprintf("ns-%d", i%4)
		for j, typ := range []event.Type{event.Added, event.Modified, event.Deleted} {
			m.Type, m.ResourceVersion = typ, fmt.Sprint(1000+10*i+j)
			publish(t, js, m)
		}
	}
	var all []delivery
	deadline := time.After(serverReady)
	for len(all) < 3*objects {
		select {
		case h := <-got:
			all = append(all, h)
		case <-deadline:
			t.Fatalf("handled %d events after %s, want %d", len(all), serverReady, 3*objects)
		}
	}
	cancel()
	for range members {
		if err := <-done; err != nil {
			t.Errorf("JoinPartitioned: got %v, want nil after the context ended", err)
		}
	}

	ids := make(map[string]bool)
	memberOf := make(map[string]int)
	lastRV := make(map[string]string)
	perMember := make([]int, members)
	for _, h := range all {
		if ids[h.e.ID()] {
			t.Errorf("event %s of %s handled twice", h.e.ID(), h.e.Name)
		}
		ids[h.e.ID()] = true
		if want := h.partition % members; h.member != want {
			t.Errorf("%s (partition %d): handled by member %d, want its first choice %d", h.e.Name, h.partition, h.member, want)
		}
		if m, ok := memberOf[h.e.Name]; ok && m != h.member {
			t.Errorf("%s: handled by members %d and %d, want one", h.e.Name, m, h.member)
		}
		memberOf[h.e.Name] = h.member
		if rv, err := consumer.CompareResourceVersions(h.e.ResourceVersion, lastRV[h.e.Name]); lastRV[h.e.Name] != "" && (err != nil || rv <= 0) {
			t.Errorf("%s: rv %s handled after rv %s", h.e.Name, h.e.ResourceVersion, lastRV[h.e.Name])
		}
		lastRV[h.e.Name] = h.e.ResourceVersion
		perMember[h.member]++
	}
	for m, n := range perMember {
		if n == 0 {
			t.Errorf("member %d handled no event: shares %v, want every member some", m, perMember)
		}
	}
	// The work queue holds nothing once every event is acknowledged.
	s, err := js.Stream(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's stream to be empty", func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

func TestJoinPartitionedReturnsAnErrorWhenItsConnectionCloses(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	source, _ := testStream(t, js)
	group := partitionedGroup(t, js, source, 2)
	member := jsClient(t)
	done := make(chan error, 1)
	go func() { done <- consumer.JoinPartitioned(ctx, member, group, func(jetstream.Msg) {}) }()
	cons, err := js.Consumer(ctx, group, "partition-1")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the member pulling", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 1
	})
	member.Conn().Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "subscription ended") {
			t.Errorf("JoinPartitioned after its connection closed: got %v, want a subscription ended", err)
		}
	case <-time.After(serverReady):
		t.Fatalf("JoinPartitioned still running %s after its connection closed", serverReady)
	}
}

func TestPartitionedGroupOverAnAggregateHandsEveryClustersEventsOut(t *testing.T) {
	const perCluster = 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := startFanIn(t, "east", "west")
	if _, err := consumer.EnsureAggregate(ctx, f.hub, consumer.Aggregate{Name: "KUBE_ALL", Sources: fanInSources("east", "west")}); err != nil {
		t.Fatal(err)
	}
	if _, err := consumer.EnsurePartitioned(ctx, f.hub, consumer.PartitionConfig{Name: "ALL_GROUP", Source: "KUBE_ALL", Partitions: 3, ReplayAll: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"east", "west"} {
		for i := range perCluster {
			publish(t, f.leaves[c], objectMeta(c, "configmaps", "ConfigMap", i))
		}
	}
	got := make(chan delivery, 2*perCluster)
	done := make(chan error, 1)
	go func() {
		done <- consumer.JoinPartitioned(ctx, f.hub, "ALL_GROUP", func(msg jetstream.Msg) {
			e, err := consumer.Decode(msg)
			if err != nil {
				t.Errorf("decode %s: %v", msg.Subject(), err)
				_ = msg.Term()
				return
			}
			_ = msg.Ack()
			p, _ := consumer.PartitionOf(msg)
			got <- delivery{partition: p, e: e}
		})
	}()
	partitionOf := make(map[string]int) // namespace/name -> partition
	seen := make(map[string]bool)
	for range 2 * perCluster {
		select {
		case d := <-got:
			e := d.e
			if seen[e.ID()] {
				t.Errorf("event %s of %s/%s handed out twice", e.ID(), e.Cluster, e.Name)
			}
			seen[e.ID()] = true
			key := e.Namespace + "/" + e.Name
			if p, ok := partitionOf[key]; ok && p != d.partition {
				t.Errorf("%s: partition %d in %s, %d in the other cluster, want one: a function of namespace and name", key, d.partition, e.Cluster, p)
			}
			partitionOf[key] = d.partition
		case <-time.After(serverReady):
			t.Fatalf("got %d events after %s, want %d", len(seen), serverReady, 2*perCluster)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("JoinPartitioned: %v", err)
	}
}

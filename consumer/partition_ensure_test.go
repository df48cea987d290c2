package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestEnsurePartitionedRefusesAMissingSourceAndCreatesNothing(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	source, _ := testStream(t, js)
	group := source + "_GROUP"
	_, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{
		Name: group, Source: source + "_MISTYPED", Partitions: 2, ReplayAll: true,
	})
	if !errors.Is(err, consumer.ErrSourceNotFound) {
		t.Fatalf("a mistyped source: got %v, want ErrSourceNotFound", err)
	}
	if _, err := js.Stream(ctx, group); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("group stream after a mistyped source: got %v, want ErrStreamNotFound", err)
	}
}

func TestEnsurePartitionedCreatesAGroupOnlyWhenToldWhereToStart(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	source, _ := testStream(t, js)
	group := source + "_GROUP"
	_, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: group, Source: source, Partitions: 2})
	if !errors.Is(err, consumer.ErrNoStartPosition) {
		t.Fatalf("a new group without StartSequence or ReplayAll: got %v, want ErrNoStartPosition", err)
	}
	if _, err := js.Stream(ctx, group); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("group stream after ErrNoStartPosition: got %v, want ErrStreamNotFound", err)
	}
	partitionedGroup(t, js, source, 2)
	// An existing group: members may ensure it without a start.
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: group, Source: source, Partitions: 2}); err != nil {
		t.Errorf("an existing group without a start: got %v, want nil", err)
	}
	_, err = consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: group, Source: source, Partitions: 2, StartSequence: 3, ReplayAll: true})
	if err == nil {
		t.Errorf("StartSequence and ReplayAll together: got nil error, want one")
	}
}

// refusingConsumers is a JetStream whose server refuses new consumers, as a nats-server
// before 2.12 refuses the prioritized policy.
type refusingConsumers struct{ jetstream.JetStream }

// errRefused is the refusal.
var errRefused = errors.New("consumer refused")

// CreateConsumer refuses.
func (refusingConsumers) CreateConsumer(context.Context, string, jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return nil, errRefused
}

func TestEnsurePartitionedLeavesNoStreamWhenItsConsumersAreRefused(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	source, _ := testStream(t, js)
	group := source + "_GROUP"
	_, err := consumer.EnsurePartitioned(ctx, refusingConsumers{js}, consumer.PartitionConfig{
		Name: group, Source: source, Partitions: 2, ReplayAll: true,
	})
	if !errors.Is(err, errRefused) {
		t.Fatalf("consumers refused: got %v, want the refusal", err)
	}
	if _, err := js.Stream(ctx, group); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("group stream after its consumers were refused: got %v, want ErrStreamNotFound (deleted again)", err)
	}
}

func TestServerVersionCheckNeedsTwoTwelve(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"2.11.9", false}, {"2.10.0", false}, {"1.99.0", false},
		{"2.12.0", true}, {"2.15.3", true}, {"v2.12.0-beta.1", true}, {"3.0.0", true}, {"", true}, {"odd", true},
	}
	for _, tt := range tests {
		if got := consumer.ServerAtLeast(tt.v, 2, 12); got != tt.want {
			t.Errorf("server %q at least 2.12: got %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestAGroupStartingAtReplacementStartLosesNoEvent replaces a group, once while it holds
// events and once when it holds none: the new group starts at the oldest event held, or after
// the last one sourced, and then holds every later event.
func TestAGroupStartingAtReplacementStartLosesNoEvent(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	source, cluster := testStream(t, js)
	group := partitionedGroup(t, js, source, 2)
	var first uint64
	for i := range 4 {
		seq := publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", i))
		if i == 0 {
			first = seq
		}
	}
	g, err := js.Stream(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "4 events in the group", func() bool {
		info, err := g.Info(ctx)
		return err == nil && info.State.Msgs == 4
	})
	if got, err := consumer.ReplacementStart(ctx, js, group); err != nil || got != first {
		t.Fatalf("ReplacementStart holding every event: got %d, %v, want %d", got, err, first)
	}

	// Handle them all: the group holds none.
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = consumer.JoinPartitioned(mctx, js, group, func(msg jetstream.Msg) { _ = msg.DoubleAck(mctx) })
	})
	waitFor(t, "the group emptied", func() bool {
		info, err := g.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	stop()
	wg.Wait()
	start, err := consumer.ReplacementStart(ctx, js, group)
	if err != nil || start != first+4 {
		t.Fatalf("ReplacementStart holding none: got %d, %v, want %d", start, err, first+4)
	}
	next := group + "_P3"
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{Name: next, Source: source, Partitions: 3, StartSequence: start}); err != nil {
		t.Fatal(err)
	}
	m := objectMeta(cluster, "configmaps", "ConfigMap", 9)
	m.Type = event.Modified
	publish(t, js, m)
	n, err := js.Stream(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the later event in the new group", func() bool {
		info, err := n.Info(ctx)
		return err == nil && info.State.Msgs >= 1
	})
	info, err := n.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Errorf("new group: got %v events (%v), want only the one published after the replacement", info.State.Msgs, err)
	}
}

// TestAHandlerSlowerThanAckWaitKeepsItsEvent has a member take longer than AckWait over an
// event, signalling nothing itself, while another member waits: the event is not delivered
// again, to either.
func TestAHandlerSlowerThanAckWaitKeepsItsEvent(t *testing.T) {
	// slowAckWait is short to keep the test quick; the handler works three of them.
	const slowAckWait = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	js := jsClient(t)
	source, cluster := testStream(t, js)
	group := source + "_GROUP"
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{
		Name: group, Source: source, Partitions: 1, AckWait: slowAckWait, ReplayAll: true,
	}); err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		member    int
		delivered uint64
	}
	var mu sync.Mutex
	var got []delivery
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for member := range 2 {
		mjs := jsClient(t)
		wg.Go(func() {
			_ = consumer.JoinPartitioned(ctx, mjs, group, func(msg jetstream.Msg) {
				md, err := msg.Metadata()
				if err != nil {
					t.Errorf("metadata: %v", err)
					return
				}
				mu.Lock()
				got = append(got, delivery{member, md.NumDelivered})
				mu.Unlock()
				time.Sleep(3 * slowAckWait) // the slow work itself, not a wait for a result
				_ = msg.DoubleAck(ctx)
			}, consumer.AsMember(member, 2))
		})
	}
	publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", 0))
	cons, err := js.Consumer(ctx, group, "partition-0")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event acknowledged", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Consumer >= 1 && info.NumAckPending == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].delivered != 1 {
		t.Errorf("deliveries of an event handled for 3 AckWaits: got %+v, want one, delivered once", got)
	}
}

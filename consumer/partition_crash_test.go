package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestAMemberThatDiesHoldsItsEventsPartitionUntilAckWaitAndNothingOvertakesIt has a member die
// (its connection gone without a word) while it holds an event of partition 0, and a second
// member take over: the held event comes again, to the second member (its second delivery),
// before any later event of its partition; partition 1, whose
// events the dead member had acknowledged, goes on with its own; every event is handled, the
// held one twice (once by each member), no other twice.
func TestAMemberThatDiesHoldsItsEventsPartitionUntilAckWaitAndNothingOvertakesIt(t *testing.T) {
	// crashAckWait is short to keep the test quick, and long enough that the second member
	// joins well inside it.
	const crashAckWait = 2 * time.Second
	const objects = 12
	ctx, cancel := context.WithCancel(context.Background())
	js := jsClient(t)
	var members sync.WaitGroup
	release := make(chan struct{})
	t.Cleanup(func() { close(release); cancel(); members.Wait() })
	source, cluster := testStream(t, js)
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{
		Name: source + "_GROUP", Source: source, Partitions: 2, AckWait: crashAckWait, ReplayAll: true,
	}); err != nil {
		t.Fatal(err)
	}
	group := source + "_GROUP"
	publishRound := func(typ event.Type) {
		for i := range objects {
			m := objectMeta(cluster, "configmaps", "ConfigMap", i)
			m.Type, m.ResourceVersion = typ, fmt.Sprint(1000+i)
			if typ == event.Modified {
				m.ResourceVersion = fmt.Sprint(2000 + i)
			}
			publish(t, js, m)
		}
	}
	publishRound(event.Added)

	// The first member takes partition 0's first event and dies with it in its hands; it
	// handles partition 1.
	var once sync.Once
	var ackedByFirst atomic.Int64
	held := make(chan string, 1)
	dying := jsClient(t)
	members.Go(func() {
		_ = consumer.JoinPartitioned(ctx, dying, group, func(msg jetstream.Msg) {
			if p, _ := consumer.PartitionOf(msg); p == 0 {
				once.Do(func() {
					e, _ := consumer.Decode(msg)
					held <- e.ID()
				})
				<-release // never acknowledged
				return
			}
			if msg.DoubleAck(ctx) == nil {
				ackedByFirst.Add(1)
			}
		})
	})
	var heldID string
	select {
	case heldID = <-held:
	case <-time.After(serverReady):
		t.Fatalf("the first member got no event of partition 0 after %s", serverReady)
	}
	p1, err := js.Consumer(ctx, group, "partition-1")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "partition 1 handled by the first member", func() bool {
		info, err := p1.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	dying.Conn().Close()

	// The second member takes over; the objects change again.
	type got struct {
		partition int
		e         consumer.Event
		delivered uint64
	}
	deliveries := make(chan got, 4*objects)
	taking := jsClient(t)
	members.Go(func() {
		_ = consumer.JoinPartitioned(ctx, taking, group, func(msg jetstream.Msg) {
			p, _ := consumer.PartitionOf(msg)
			e, err := consumer.Decode(msg)
			md, merr := msg.Metadata()
			if err != nil || merr != nil {
				t.Errorf("decode %s: %v %v", msg.Subject(), err, merr)
				return
			}
			deliveries <- got{partition: p, e: e, delivered: md.NumDelivered}
			_ = msg.Ack()
		})
	})
	publishRound(event.Modified)

	// Every event but those the first member acknowledged.
	want := 2*objects - int(ackedByFirst.Load())
	handled := map[string]int{}
	var order0 []got
	var firstOf1 *got
	for len(handled) < want {
		select {
		case g := <-deliveries:
			if handled[g.e.ID()] > 0 {
				t.Errorf("%s (%s) handled twice by the second member", g.e.Name, g.e.Type)
			}
			handled[g.e.ID()]++
			if g.partition == 0 {
				order0 = append(order0, g)
			} else if firstOf1 == nil {
				firstOf1 = &g
			}
		case <-time.After(serverReady):
			t.Fatalf("the second member handled %d events after %s, want %d: every one not acknowledged", len(handled), serverReady, want)
		}
	}
	if len(order0) == 0 || order0[0].e.ID() != heldID || order0[0].delivered != 2 {
		var first string
		if len(order0) > 0 {
			first = fmt.Sprintf("%s %s (delivery %d)", order0[0].e.Name, order0[0].e.Type, order0[0].delivered)
		}
		t.Fatalf("partition 0 after the death: first got %s, want the held event %s again (delivery 2) before anything later", first, heldID)
	}
	if firstOf1 == nil || firstOf1.delivered != 1 {
		t.Errorf("partition 1 after the death: got %+v, want its new events, each delivered once", firstOf1)
	}
}

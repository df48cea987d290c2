package consumer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

// TestMaxAckPendingOneStallsUntilAckWaitAfterACrash proves what docs/events.md says next to
// the MaxAckPending(1) advice: when a consumer dies holding an unacknowledged event, a
// restarted one gets nothing, not even later events, until the consumer's AckWait has passed
// since the delivery; then the same event comes again, and the rest follows.
func TestMaxAckPendingOneStallsUntilAckWaitAfterACrash(t *testing.T) {
	// stallAckWait is short to keep the test quick, and long enough that the restarted
	// service asks for events well inside it.
	const stallAckWait = 2 * time.Second
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	for i := range 2 {
		publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", i))
	}

	// The first process takes configmaps-0 and is killed before it acknowledges it: its
	// connection goes away without a word to the server.
	crashing := jsClient(t)
	cons, err := consumer.Durable(ctx, crashing, stream, "stall", nil, consumer.MaxAckPending(1), consumer.AckWait(stallAckWait))
	if err != nil {
		t.Fatalf("Durable: got error %v, want nil", err)
	}
	beforeDelivery := time.Now()
	if got, _ := fetch(t, cons, 1, false); !slices.Equal(names(got), []string{"configmaps-0"}) {
		t.Fatalf("first delivery: got %q, want configmaps-0", names(got))
	}
	crashing.Conn().Close()

	// The restarted process binds the consumer. The server holds configmaps-0 as pending
	// and delivers nothing else: MaxAckPending is reached.
	restarted, err := consumer.Durable(ctx, js, stream, "stall", nil)
	if err != nil || restarted.Created {
		t.Fatalf("Durable after the crash: got created %v error %v, want bound", restarted.Created, err)
	}
	info, err := restarted.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 || info.NumPending != 1 {
		t.Fatalf("after the crash: got %d pending acks and %d undelivered, want 1 and 1 (configmaps-1 held back)", info.NumAckPending, info.NumPending)
	}

	// Wait for the first delivery, however long the machine takes: it is the same event,
	// redelivered, and never earlier than AckWait after the first delivery.
	var first jetstream.Msg
	for deadline := time.Now().Add(30 * stallAckWait); first == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("nothing delivered %s after the crash, want configmaps-0 again after AckWait %s", 30*stallAckWait, stallAckWait)
		}
		_, msgs := fetch(t, restarted, 1, false)
		if len(msgs) > 0 {
			first = msgs[0]
		}
	}
	waited := time.Since(beforeDelivery)
	e, err := consumer.Decode(first)
	if err != nil {
		t.Fatal(err)
	}
	md, err := first.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "configmaps-0" || md.NumDelivered != 2 {
		t.Fatalf("first delivery after the crash: got %s (delivery %d), want configmaps-0 redelivered (delivery 2)", e.Name, md.NumDelivered)
	}
	if waited < stallAckWait {
		t.Errorf("redelivered %s after the first delivery, want no earlier than AckWait %s", waited, stallAckWait)
	}
	if err := first.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := fetch(t, restarted, 10, true); !slices.Equal(names(got), []string{"configmaps-1"}) {
		t.Errorf("after acknowledging it: got %q, want configmaps-1", names(got))
	}
}

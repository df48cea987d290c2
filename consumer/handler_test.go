package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// handled records what a HandlerFunc was called with, for the test to wait on.
type handled struct {
	mu    sync.Mutex
	calls []string // "<name> <type> <rv>"
}

func (h *handled) add(e consumer.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("%s %s %s", e.Name, e.Type, e.ResourceVersion))
}

func (h *handled) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// consumeWith runs Handler(fn, opts) on a new durable consumer of the whole stream, one
// message in flight, and returns the consumer.
func consumeWith(t *testing.T, js jetstream.JetStream, stream, cluster string, ackWait time.Duration,
	fn consumer.HandlerFunc, opts ...consumer.HandlerOption) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cons, err := consumer.Durable(ctx, js, stream, "handler", []string{event.StreamSubject("kube", cluster)},
		consumer.MaxAckPending(1), consumer.AckWait(ackWait))
	if err != nil {
		t.Fatal(err)
	}
	h, err := consumer.Handler(ctx, fn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return cons
}

// waitDone waits until the consumer has nothing pending and nothing unacknowledged.
func waitDone(t *testing.T, cons jetstream.Consumer) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer still has %d pending and %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHandlerAcksOnNilNaksOnErrorAndTerminatesWhatCannotBeHandled(t *testing.T) {
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	ctx := context.Background()

	// The server's advisory for every terminated message of the stream.
	nc := js.Conn()
	terminated, err := nc.SubscribeSync(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.%s.>", stream))
	if err != nil {
		t.Fatal(err)
	}
	a := objectMeta(cluster, "configmaps", "ConfigMap", 1)
	publish(t, js, a)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: fmt.Sprintf("kube.%s.not.an.event", cluster), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	b := objectMeta(cluster, "configmaps", "ConfigMap", 2)
	publish(t, js, b)
	c := objectMeta(cluster, "configmaps", "ConfigMap", 3)
	publish(t, js, c)

	var h handled
	var failedOnce sync.Once
	var errs []error
	var errsMu sync.Mutex
	cons := consumeWith(t, js, stream, cluster, 30*time.Second, func(_ context.Context, e consumer.Event) error {
		h.add(e)
		var err error
		switch e.Name {
		case a.Name:
			failedOnce.Do(func() { err = errors.New("dependency down") })
		case c.Name:
			err = fmt.Errorf("cannot read it: %w", consumer.ErrTerminate)
		}
		return err
	}, consumer.RetryDelays(10*time.Millisecond), consumer.OnError(func(_ jetstream.Msg, err error) {
		errsMu.Lock()
		defer errsMu.Unlock()
		errs = append(errs, err)
	}))
	info := waitDone(t, cons)

	want := []string{"configmaps-1 added 101", "configmaps-1 added 101", "configmaps-2 added 102", "configmaps-3 added 103"}
	if got := h.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handler called with %q, want %q (a once more after its error, c once, never the invalid message)", got, want)
	}
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 5 {
		t.Errorf("delivered %d, %d redelivered pending; want 5 deliveries (4 messages, one naked once) and none pending redelivery", info.Delivered.Consumer, info.NumRedelivered)
	}
	for i := range 2 { // the message that is not an event, and c
		if _, err := terminated.NextMsg(10 * time.Second); err != nil {
			t.Errorf("termination advisory %d of 2: %v", i+1, err)
		}
	}
	errsMu.Lock()
	defer errsMu.Unlock()
	var invalid, terminate int
	for _, err := range errs {
		if errors.Is(err, consumer.ErrInvalidEvent) {
			invalid++
		}
		if errors.Is(err, consumer.ErrTerminate) {
			terminate++
		}
	}
	if len(errs) != 3 || invalid != 1 || terminate != 1 {
		t.Errorf("OnError got %v, want the invalid event, the handler's error and its termination", errs)
	}
}

func TestHandlerWithTrackerSkipsWhatIsNotNewerAndAppliesInferredDeletes(t *testing.T) {
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	ctx := context.Background()

	m := objectMeta(cluster, "configmaps", "ConfigMap", 1) // added at 101
	publish(t, js, m)
	m.Type = event.Modified // the relay's repeat of the last change, as modified
	publish(t, js, m)
	m.ResourceVersion = "102"
	publish(t, js, m)
	m.Type, m.Origin = event.Deleted, event.Relist // inferred: repeats 102
	hdr := m.Header()
	hdr.Set(event.HeaderFinalStateUnknown, "true")
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":"102"}}`, m.Name, m.Namespace, m.UID)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject("kube").String(), Header: hdr, Data: []byte(body)}); err != nil {
		t.Fatal(err)
	}

	var h handled
	tr := consumer.NewTracker(nil, 0)
	cons := consumeWith(t, js, stream, cluster, 30*time.Second, func(_ context.Context, e consumer.Event) error {
		h.add(e)
		return nil
	}, consumer.TrackWith(tr))
	waitDone(t, cons)

	want := []string{"configmaps-1 added 101", "configmaps-1 modified 102", "configmaps-1 deleted 102"}
	if got := h.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handler called with %q, want %q", got, want)
	}
}

func TestHandlerSignalsInProgressDuringWorkLongerThanAckWait(t *testing.T) {
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", 1))

	// The work takes twice the AckWait, and the handler signals ten times per AckWait, so a
	// busy machine would have to hold the signal back for most of an AckWait to fail it.
	const ackWait = time.Second
	var h handled
	cons := consumeWith(t, js, stream, cluster, ackWait, func(ctx context.Context, e consumer.Event) error {
		h.add(e)
		select { // work that takes twice the AckWait
		case <-time.After(2 * ackWait):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, consumer.InProgressEvery(ackWait/10))
	info := waitDone(t, cons)

	if got := h.get(); len(got) != 1 {
		t.Errorf("handler called %d times (%q), want once: the work was delivered again while it ran", len(got), got)
	}
	if info.Delivered.Consumer != 1 {
		t.Errorf("message delivered %d times, want once", info.Delivered.Consumer)
	}
}

// ctxStore is a MemoryStore that, like a KV-backed store, fails a write once its context
// has ended.
type ctxStore struct{ *consumer.MemoryStore }

func (s ctxStore) Put(ctx context.Context, key consumer.ObjectKey, st consumer.TrackedState) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemoryStore.Put(ctx, key, st)
}

func TestHandlerRecordsWorkDoneWhileTheServiceStops(t *testing.T) {
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", 1))

	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	cons, err := consumer.Durable(context.Background(), js, stream, "stopping",
		[]string{event.StreamSubject("kube", cluster)}, consumer.MaxAckPending(1))
	if err != nil {
		t.Fatal(err)
	}
	tr := consumer.NewTracker(ctxStore{consumer.NewMemoryStore()}, 0)
	var h handled
	hf, err := consumer.Handler(ctx, func(_ context.Context, e consumer.Event) error {
		h.add(e)
		stop() // the service is told to stop while the work completes
		return nil
	}, consumer.TrackWith(tr))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(hf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	waitDone(t, cons)

	if got := h.get(); len(got) != 1 {
		t.Errorf("handler called %d times (%q), want 1", len(got), got)
	}
	d, err := tr.Check(context.Background(), consumer.Event{Meta: objectMeta(cluster, "configmaps", "ConfigMap", 1)})
	if err != nil || d != consumer.Stale {
		t.Errorf("tracker says %s, %v, want stale: the work done was not recorded", d, err)
	}
}

package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

// fetchWait bounds a fetch that expects nothing more: long enough for a delivery on a busy
// machine, short enough to keep the tests quick.
const fetchWait = time.Second

// fetch returns the events a fetch of up to n messages delivers, acknowledging each when ack
// is set, with the messages themselves.
func fetch(t *testing.T, cons jetstream.Consumer, n int, ack bool) ([]consumer.Event, []jetstream.Msg) {
	t.Helper()
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(fetchWait))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var events []consumer.Event
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		e, err := consumer.Decode(msg)
		if err != nil {
			t.Fatalf("decode message on %s: %v", msg.Subject(), err)
		}
		if ack {
			if err := msg.DoubleAck(context.Background()); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		events = append(events, e)
		msgs = append(msgs, msg)
	}
	if err := batch.Error(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return events, msgs
}

func names(events []consumer.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Name
	}
	return out
}

func TestDurableResumesWhereItStopped(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", i)))
		publish(t, js, objectMeta(cluster, "secrets", "Secret", i)) // filtered out
	}
	filters, err := consumer.Subjects(consumer.ResourceFilter("kube", cluster, schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		t.Fatal(err)
	}

	cons, err := consumer.Durable(ctx, js, stream, "resume", filters)
	if err != nil || !cons.Created {
		t.Fatalf("Durable: got created %v error %v, want created", cons.Created, err)
	}
	cfg := cons.CachedInfo().Config
	if cfg.Durable != "resume" || cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.DeliverPolicy != jetstream.DeliverAllPolicy || cfg.FilterSubject != filters[0] {
		t.Errorf("consumer config: got durable %q ack %s deliver %s filter %q, want resume, explicit, all, %q",
			cfg.Durable, cfg.AckPolicy, cfg.DeliverPolicy, cfg.FilterSubject, filters[0])
	}
	first, _ := fetch(t, cons, 3, true)
	if got, want := names(first), []string{"configmaps-0", "configmaps-1", "configmaps-2"}; !slices.Equal(got, want) {
		t.Fatalf("first fetch: got %q, want %q", got, want)
	}
	for i, e := range first {
		if e.Sequence != seqs[i] || e.Stored.IsZero() || e.Prefix != "kube" || e.Cluster != cluster {
			t.Errorf("event %d: got sequence %d stored %v prefix %q cluster %q, want %d, a time, kube, %s", i, e.Sequence, e.Stored, e.Prefix, e.Cluster, seqs[i], cluster)
		}
	}

	// A restarted service binds the same consumer and goes on after what it acknowledged.
	again, err := consumer.Durable(ctx, js, stream, "resume", filters)
	if err != nil || again.Created {
		t.Fatalf("Durable again: got created %v error %v, want bound", again.Created, err)
	}
	publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", 5))
	rest, _ := fetch(t, again, 10, true)
	if got, want := names(rest), []string{"configmaps-3", "configmaps-4", "configmaps-5"}; !slices.Equal(got, want) {
		t.Errorf("after rebinding: got %q, want %q", got, want)
	}
}

func TestDurableRedeliversUnacknowledgedInOrder(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	for i := range 2 {
		publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", i))
	}
	cons, err := consumer.Durable(ctx, js, stream, "redeliver", nil, consumer.AckWait(300*time.Millisecond), consumer.MaxAckPending(1))
	if err != nil {
		t.Fatalf("Durable: got error %v, want nil", err)
	}
	// Not acknowledged, as by a service that crashed while handling it.
	got, _ := fetch(t, cons, 1, false)
	if !slices.Equal(names(got), []string{"configmaps-0"}) {
		t.Fatalf("first delivery: got %q, want configmaps-0", names(got))
	}
	// After AckWait the same event comes again, and nothing later before it is acknowledged
	// (MaxAckPending 1).
	again, msgs := fetch(t, cons, 10, true)
	if !slices.Equal(names(again), []string{"configmaps-0", "configmaps-1"}) || again[0].ID() != got[0].ID() {
		t.Fatalf("after AckWait: got %q, want configmaps-0 (same id) then configmaps-1", names(again))
	}
	if md, err := msgs[0].Metadata(); err != nil || md.NumDelivered != 2 {
		t.Errorf("redelivery: got delivery count %v (%v), want 2", md, err)
	}
}

func TestDurableStartPositions(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	var seqs []uint64
	for i := range 3 {
		seqs = append(seqs, publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", i)))
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.GetMsg(ctx, seqs[1])
	if err != nil {
		t.Fatal(err)
	}

	fromNew, err := consumer.Durable(ctx, js, stream, "new", nil, consumer.DeliverNew())
	if err != nil {
		t.Fatalf("Durable DeliverNew: got error %v, want nil", err)
	}
	fromTime, err := consumer.Durable(ctx, js, stream, "from", nil, consumer.DeliverFrom(second.Time))
	if err != nil {
		t.Fatalf("Durable DeliverFrom: got error %v, want nil", err)
	}
	publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", 3))

	if got, _ := fetch(t, fromNew, 10, true); !slices.Equal(names(got), []string{"configmaps-3"}) {
		t.Errorf("DeliverNew: got %q, want only what was stored after its creation", names(got))
	}
	if got, _ := fetch(t, fromTime, 10, true); !slices.Equal(names(got), []string{"configmaps-1", "configmaps-2", "configmaps-3"}) {
		t.Errorf("DeliverFrom(time of the second event): got %q, want configmaps-1 onwards", names(got))
	}
}

func TestDurableBindsOnlyWhatWasAskedFor(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	seq := publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", 0))
	cms, err := consumer.Subjects(consumer.ResourceFilter("kube", cluster, schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := consumer.Subjects(consumer.ResourceFilter("kube", cluster, schema.GroupResource{Resource: "secrets"}))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := consumer.Durable(ctx, js, stream, "svc", cms, consumer.AckWait(time.Minute), consumer.MaxAckPending(5))
	if err != nil || !svc.Created || svc.Updated {
		t.Fatalf("Durable: got created %v updated %v error %v, want created", svc.Created, svc.Updated, err)
	}
	both := []string{cms[0], secrets[0]}
	if _, err := consumer.Durable(ctx, js, stream, "pair", both); err != nil {
		t.Fatalf("Durable with two filters: got error %v, want nil", err)
	}
	if _, err := consumer.Durable(ctx, js, stream, "fromseq", cms, consumer.DeliverFromSequence(seq)); err != nil {
		t.Fatalf("Durable from a sequence: got error %v, want nil", err)
	}
	from := time.Now()
	if _, err := consumer.Durable(ctx, js, stream, "fromtime", cms, consumer.DeliverFrom(from)); err != nil {
		t.Fatalf("Durable from a time: got error %v, want nil", err)
	}
	if _, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "noack", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		consumer string
		filters  []string
		opts     []consumer.DurableOption
		conflict []string // what the error names; none: bound
	}{
		{name: "no options binds as it is", consumer: "svc", filters: cms},
		{name: "the same options bind", consumer: "svc", filters: cms, opts: []consumer.DurableOption{consumer.MaxAckPending(5), consumer.AckWait(time.Minute)}},
		{name: "the same start sequence binds", consumer: "fromseq", filters: cms, opts: []consumer.DurableOption{consumer.DeliverFromSequence(seq)}},
		{name: "the same start time binds", consumer: "fromtime", filters: cms, opts: []consumer.DurableOption{consumer.DeliverFrom(from)}},
		{name: "another start time conflicts", consumer: "fromtime", filters: cms, opts: []consumer.DurableOption{consumer.DeliverFrom(from.Add(time.Millisecond))},
			conflict: []string{"start position from " + from.UTC().Format(time.RFC3339Nano)}},
		{name: "the same filters in another order bind", consumer: "pair", filters: []string{secrets[0], cms[0]}},
		{name: "another start position conflicts", consumer: "svc", filters: cms, opts: []consumer.DurableOption{consumer.DeliverNew()},
			conflict: []string{"start position all, want new", "delete the consumer"}},
		{name: "another start sequence conflicts", consumer: "fromseq", filters: cms, opts: []consumer.DurableOption{consumer.DeliverFromSequence(seq + 1)},
			conflict: []string{fmt.Sprintf("start position from sequence %d, want from sequence %d", seq, seq+1)}},
		{name: "another ack wait and max ack pending conflict", consumer: "svc", filters: cms, opts: []consumer.DurableOption{consumer.MaxAckPending(50), consumer.AckWait(time.Second)},
			conflict: []string{"ack wait 1m0s, want 1s", "max ack pending 5, want 50", "UpdateExisting"}},
		{name: "other filters conflict", consumer: "svc", filters: secrets, conflict: []string{"filters"}},
		{name: "a filter more conflicts", consumer: "svc", filters: both, conflict: []string{"filters"}},
		{name: "no filter conflicts with one", consumer: "svc", conflict: []string{"filters"}},
		{name: "no ack conflicts", consumer: "noack", conflict: []string{"ack policy AckNone, want AckExplicit"}},
		{name: "no ack conflicts even with UpdateExisting", consumer: "noack", opts: []consumer.DurableOption{consumer.UpdateExisting()}, conflict: []string{"ack policy"}},
		{name: "another start position conflicts even with UpdateExisting", consumer: "svc", filters: cms,
			opts: []consumer.DurableOption{consumer.DeliverNew(), consumer.AckWait(time.Second), consumer.UpdateExisting()}, conflict: []string{"start position", "ack wait"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := js.Consumer(ctx, stream, tt.consumer)
			if err != nil {
				t.Fatal(err)
			}
			cons, err := consumer.Durable(ctx, js, stream, tt.consumer, tt.filters, tt.opts...)
			if len(tt.conflict) > 0 {
				if !errors.Is(err, consumer.ErrConsumerConflict) {
					t.Fatalf("Durable: got error %v, want ErrConsumerConflict", err)
				}
				for _, want := range tt.conflict {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Durable: got error %q, want it to say %q", err, want)
					}
				}
			} else if err != nil || cons.Created || cons.Updated {
				t.Fatalf("Durable: got created %v updated %v error %v, want bound", cons.Created, cons.Updated, err)
			}
			// Binding or refusing changes nothing on the server.
			after, err := js.Consumer(ctx, stream, tt.consumer)
			if err != nil {
				t.Fatal(err)
			}
			if b, a := before.CachedInfo().Config, after.CachedInfo().Config; !reflect.DeepEqual(a, b) {
				t.Errorf("consumer config: got %+v, want it unchanged %+v", a, b)
			}
		})
	}
}

func TestDurableUpdateExistingChangesWhatTheServerCan(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, cluster := testStream(t, js)
	for i := range 3 {
		publish(t, js, objectMeta(cluster, "configmaps", "ConfigMap", i))
		publish(t, js, objectMeta(cluster, "secrets", "Secret", i))
	}
	cms, err := consumer.Subjects(consumer.ResourceFilter("kube", cluster, schema.GroupResource{Resource: "configmaps"}))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := consumer.Subjects(consumer.ResourceFilter("kube", cluster, schema.GroupResource{Resource: "secrets"}))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.Durable(ctx, js, stream, "svc", cms, consumer.MaxAckPending(1))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fetch(t, cons, 2, true); !slices.Equal(names(got), []string{"configmaps-0", "configmaps-1"}) {
		t.Fatalf("first fetch: got %q, want configmaps-0, configmaps-1", names(got))
	}

	both := []string{cms[0], secrets[0]}
	updated, err := consumer.Durable(ctx, js, stream, "svc", both,
		consumer.MaxAckPending(50), consumer.AckWait(time.Minute), consumer.UpdateExisting())
	if err != nil || updated.Created || !updated.Updated {
		t.Fatalf("Durable with UpdateExisting: got created %v updated %v error %v, want updated", updated.Created, updated.Updated, err)
	}
	info, err := updated.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := info.Config; cfg.MaxAckPending != 50 || cfg.AckWait != time.Minute || !slices.Equal(cfg.FilterSubjects, both) {
		t.Errorf("updated config: got max ack pending %d, ack wait %s, filters %q, want 50, 1m, %q", cfg.MaxAckPending, cfg.AckWait, cfg.FilterSubjects, both)
	}
	// It keeps its position in the stream: the next events are the ones stored after what
	// was acknowledged (configmaps-1), now of both resources; secrets-0 came before.
	got, _ := fetch(t, updated, 10, true)
	if want := []string{"secrets-1", "configmaps-2", "secrets-2"}; !slices.Equal(names(got), want) {
		t.Errorf("after the update: got %q, want %q", names(got), want)
	}

	// Asking again for what it now is binds it without updating.
	again, err := consumer.Durable(ctx, js, stream, "svc", both, consumer.MaxAckPending(50), consumer.UpdateExisting())
	if err != nil || again.Created || again.Updated {
		t.Errorf("Durable again: got created %v updated %v error %v, want bound", again.Created, again.Updated, err)
	}
}

func TestDurableRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	js := jsClient(t)
	stream, _ := testStream(t, js)
	tests := []struct {
		name    string
		durable string
		filters []string
		opts    []consumer.DurableOption
	}{
		{name: "two start positions", durable: "a", opts: []consumer.DurableOption{consumer.DeliverNew(), consumer.DeliverFrom(time.Now())}},
		{name: "zero start time", durable: "b", opts: []consumer.DurableOption{consumer.DeliverFrom(time.Time{})}},
		{name: "max ack pending 0", durable: "c", opts: []consumer.DurableOption{consumer.MaxAckPending(0)}},
		{name: "negative ack wait", durable: "d", opts: []consumer.DurableOption{consumer.AckWait(-time.Second)}},
		{name: "empty filter", durable: "e", filters: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := consumer.Durable(ctx, js, stream, tt.durable, tt.filters, tt.opts...); err == nil {
				t.Fatal("Durable: got nil error, want one")
			}
			if _, err := js.Consumer(ctx, stream, tt.durable); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Errorf("consumer %s: got %v, want ErrConsumerNotFound (nothing created)", tt.durable, err)
			}
		})
	}
	if _, err := consumer.Durable(ctx, js, stream, "", nil); err == nil {
		t.Error("Durable with an empty name: got nil error, want one")
	}
	if _, err := consumer.Durable(ctx, js, "NO_SUCH_STREAM", "x", nil); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("Durable on a missing stream: got %v, want ErrStreamNotFound", err)
	}
}

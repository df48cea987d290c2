package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DurableOption changes how Durable creates a consumer. Options apply only when the consumer
// is created: an existing consumer keeps its own settings and position.
type DurableOption func(*durableOptions) error

// durableOptions collects the options; zero values leave the server's defaults.
type durableOptions struct {
	deliver       jetstream.DeliverPolicy
	startTime     *time.Time
	startSeq      uint64
	deliverSet    bool
	maxAckPending int
	ackWait       time.Duration
}

// DeliverNew makes a new consumer start with the first event stored after its creation,
// instead of the first event in the stream.
func DeliverNew() DurableOption {
	return func(o *durableOptions) error {
		return o.setDeliver(jetstream.DeliverNewPolicy, nil)
	}
}

// DeliverFrom makes a new consumer start with the first event stored at or after t.
func DeliverFrom(t time.Time) DurableOption {
	return func(o *durableOptions) error {
		if t.IsZero() {
			return errors.New("deliver from: zero time")
		}
		return o.setDeliver(jetstream.DeliverByStartTimePolicy, &t)
	}
}

// DeliverFromSequence makes a new consumer start with the event at stream sequence seq, such
// as a Snapshot's NextSequence.
func DeliverFromSequence(seq uint64) DurableOption {
	return func(o *durableOptions) error {
		if seq == 0 {
			return errors.New("deliver from sequence: zero")
		}
		o.startSeq = seq
		return o.setDeliver(jetstream.DeliverByStartSequencePolicy, nil)
	}
}

// MaxAckPending bounds the messages delivered and not yet acknowledged (the server's default
// is 1000). 1 keeps every object's events in stream order even when one is redelivered, at
// the cost of one round trip per event.
func MaxAckPending(n int) DurableOption {
	return func(o *durableOptions) error {
		if n < 1 {
			return fmt.Errorf("max ack pending %d: want at least 1", n)
		}
		o.maxAckPending = n
		return nil
	}
}

// AckWait is how long the server waits for an acknowledgement before it delivers a message
// again (the server's default is 30s): after a crash, the events in flight come back after
// this long. Make it longer than handling one event takes.
func AckWait(d time.Duration) DurableOption {
	return func(o *durableOptions) error {
		if d <= 0 {
			return fmt.Errorf("ack wait %s: want a positive duration", d)
		}
		o.ackWait = d
		return nil
	}
}

func (o *durableOptions) setDeliver(p jetstream.DeliverPolicy, t *time.Time) error {
	if o.deliverSet {
		return errors.New("more than one start position (DeliverNew, DeliverFrom, DeliverFromSequence)")
	}
	o.deliver, o.startTime, o.deliverSet = p, t, true
	return nil
}

// Durable returns the durable pull consumer name on stream, creating it if it does not exist:
// explicit acks, the given subject filters (none: every event of the stream), delivering from
// the first event in the stream unless DeliverNew or DeliverFrom says otherwise. If the
// consumer exists, Durable binds it, keeping its settings and position, provided its filters
// are the same set and it uses explicit acks; otherwise it fails with ErrConsumerConflict
// (delete the consumer, or choose another name, to change its filters).
//
// Build filters with event.Filter, ResourceFilter and Subjects.
func Durable(ctx context.Context, js jetstream.JetStream, stream, name string, filters []string, opts ...DurableOption) (jetstream.Consumer, error) {
	var o durableOptions
	var errs []error
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			errs = append(errs, err)
		}
	}
	if name == "" {
		errs = append(errs, errors.New("empty name"))
	}
	for i, f := range filters {
		if f == "" {
			errs = append(errs, fmt.Errorf("filter %d is empty", i))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("durable consumer %q on stream %q: %w", name, stream, errors.Join(errs...))
	}

	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: o.deliver,
		OptStartTime:  o.startTime,
		OptStartSeq:   o.startSeq,
		MaxAckPending: o.maxAckPending,
		AckWait:       o.ackWait,
	}
	// One filter goes in FilterSubject, which servers before 2.10 understand too.
	if len(filters) == 1 {
		cfg.FilterSubject = filters[0]
	} else {
		cfg.FilterSubjects = filters
	}
	cons, err := js.CreateConsumer(ctx, stream, cfg)
	if err == nil {
		return cons, nil // created, or it existed with this very configuration
	}
	if !errors.Is(err, jetstream.ErrConsumerExists) {
		return nil, fmt.Errorf("durable consumer %q on stream %q: %w", name, stream, err)
	}
	// It exists with other settings: bind it if it reads the same events the same way.
	cons, err = js.Consumer(ctx, stream, name)
	if err != nil {
		return nil, fmt.Errorf("durable consumer %q on stream %q: %w", name, stream, err)
	}
	have := cons.CachedInfo().Config
	if got := filterSet(have); !slices.Equal(got, filterSet(cfg)) {
		return nil, fmt.Errorf("durable consumer %q on stream %q: %w: filters %q, want %q",
			name, stream, ErrConsumerConflict, got, filterSet(cfg))
	}
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("durable consumer %q on stream %q: %w: ack policy %s, want %s",
			name, stream, ErrConsumerConflict, have.AckPolicy, jetstream.AckExplicitPolicy)
	}
	return cons, nil
}

// filterSet returns a consumer's filter subjects, sorted and without repeats, wherever the
// configuration holds them.
func filterSet(cfg jetstream.ConsumerConfig) []string {
	var fs []string
	if cfg.FilterSubject != "" {
		fs = append(fs, cfg.FilterSubject)
	}
	fs = append(fs, cfg.FilterSubjects...)
	slices.Sort(fs)
	return slices.Compact(fs)
}

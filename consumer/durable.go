package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DurableOption sets up the consumer Durable creates. When the consumer exists, each option
// given must match its setting (see Durable), or, with UpdateExisting, changes it.
type DurableOption func(*durableOptions) error

// durableOptions collects the options; zero values leave the server's defaults.
type durableOptions struct {
	deliver       jetstream.DeliverPolicy
	startTime     *time.Time
	startSeq      uint64
	deliverSet    bool
	maxAckPending int
	ackWait       time.Duration
	update        bool
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
// the cost of one round trip per event, and of a stall after a crash: an event delivered to
// a service that died before acknowledging it blocks every delivery until AckWait has passed
// (docs/events.md, "The cost of MaxAckPending: 1").
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

// UpdateExisting makes Durable change an existing consumer's filters, and its AckWait and
// MaxAckPending where given, to the ones asked for, instead of failing with
// ErrConsumerConflict. The consumer keeps its position. A different start position or ack
// policy still fails: the server cannot change them.
func UpdateExisting() DurableOption {
	return func(o *durableOptions) error {
		o.update = true
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

// DurableConsumer is the consumer Durable created or bound. It is a jetstream.Consumer (Fetch,
// Consume, Messages, Info) that also says which of the two happened, so that a service can
// log it and tell its first start from a restart.
type DurableConsumer struct {
	jetstream.Consumer
	// Created is true when this call created the consumer, false when the consumer existed
	// and this call bound it. Two services that create the same consumer at the same moment
	// may both see true.
	Created bool
	// Updated is true when the consumer existed and this call changed its settings
	// (UpdateExisting).
	Updated bool
}

// Durable creates the durable pull consumer name on stream, or binds it if it exists: explicit
// acks, the given subject filters (none: every event of the stream), delivering from the first
// event in the stream unless DeliverNew, DeliverFrom or DeliverFromSequence says otherwise.
// The result says whether it was created or bound.
//
// An existing consumer is bound, keeping its position, only if it is what was asked for: the
// same set of filters, explicit acks, and, for each of the start position, AckWait and
// MaxAckPending that was given as an option, the same value. An option not given is not
// compared: a restarted service that passes none binds the consumer as it is. Any difference
// fails with ErrConsumerConflict naming each one, and changes nothing. With UpdateExisting,
// Durable instead applies different filters, AckWait and MaxAckPending to the existing
// consumer (as jetstream.JetStream.UpdateConsumer does); the start position and the ack
// policy cannot change on the server, so they still conflict: delete the consumer, or choose
// another name, to change them.
//
// Build filters with event.Filter, ResourceFilter and Subjects (or SubjectsAcross, on an
// aggregate stream of several clusters).
func Durable(ctx context.Context, js jetstream.JetStream, stream, name string, filters []string, opts ...DurableOption) (DurableConsumer, error) {
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
		return DurableConsumer{}, fmt.Errorf("durable consumer %q on stream %q: %w", name, stream, errors.Join(errs...))
	}

	cons, err := js.Consumer(ctx, stream, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return createDurable(ctx, js, stream, name, filters, o)
	case err != nil:
		return DurableConsumer{}, fmt.Errorf("durable consumer %q on stream %q: %w", name, stream, err)
	}
	return bindDurable(ctx, js, stream, cons, filters, o)
}

// createDurable creates the consumer Durable found missing.
func createDurable(ctx context.Context, js jetstream.JetStream, stream, name string, filters []string, o durableOptions) (DurableConsumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: o.deliver,
		OptStartTime:  o.startTime,
		OptStartSeq:   o.startSeq,
		MaxAckPending: o.maxAckPending,
		AckWait:       o.ackWait,
	}
	setFilters(&cfg, filters)
	cons, err := js.CreateConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Created by another process since we looked, with other settings: compare with those.
		if cons, err = js.Consumer(ctx, stream, name); err == nil {
			return bindDurable(ctx, js, stream, cons, filters, o)
		}
	}
	if err != nil {
		return DurableConsumer{}, fmt.Errorf("durable consumer %q on stream %q: %w", name, stream, err)
	}
	return DurableConsumer{Consumer: cons, Created: true}, nil
}

// bindDurable returns the existing consumer cons if it is what was asked for, updates it if
// it differs only in what the server can update and the caller asked for that, and fails
// naming every difference otherwise.
func bindDurable(ctx context.Context, js jetstream.JetStream, stream string, cons jetstream.Consumer, filters []string, o durableOptions) (DurableConsumer, error) {
	have := cons.CachedInfo().Config
	fixed, updatable := differences(have, filters, o)
	if len(fixed) == 0 && len(updatable) == 0 {
		return DurableConsumer{Consumer: cons}, nil
	}
	if len(fixed) > 0 || !o.update {
		hint := "delete the consumer or choose another name to change them"
		if len(fixed) == 0 {
			hint = "pass UpdateExisting to change them"
		}
		return DurableConsumer{}, fmt.Errorf("durable consumer %q on stream %q: %w: %s (%s)",
			have.Durable, stream, ErrConsumerConflict, strings.Join(append(fixed, updatable...), "; "), hint)
	}
	cfg := have
	if o.ackWait != 0 {
		cfg.AckWait = o.ackWait
	}
	if o.maxAckPending != 0 {
		cfg.MaxAckPending = o.maxAckPending
	}
	setFilters(&cfg, filters)
	updated, err := js.UpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return DurableConsumer{}, fmt.Errorf("durable consumer %q on stream %q: update %s: %w",
			have.Durable, stream, strings.Join(updatable, "; "), err)
	}
	return DurableConsumer{Consumer: updated, Updated: true}, nil
}

// differences lists how the existing configuration have differs from the filters and the
// options given: fixed holds what the server cannot change on an existing consumer (ack
// policy, start position), updatable what it can (filters, AckWait, MaxAckPending). Options
// not given are not compared.
func differences(have jetstream.ConsumerConfig, filters []string, o durableOptions) (fixed, updatable []string) {
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		fixed = append(fixed, fmt.Sprintf("ack policy %s, want %s", have.AckPolicy, jetstream.AckExplicitPolicy))
	}
	if o.deliverSet {
		want := jetstream.ConsumerConfig{DeliverPolicy: o.deliver, OptStartSeq: o.startSeq, OptStartTime: o.startTime}
		if got, w := startPosition(have), startPosition(want); got != w {
			fixed = append(fixed, fmt.Sprintf("start position %s, want %s", got, w))
		}
	}
	want := filterSet(jetstream.ConsumerConfig{FilterSubjects: filters})
	if got := filterSet(have); !slices.Equal(got, want) {
		updatable = append(updatable, fmt.Sprintf("filters %q, want %q", got, want))
	}
	if o.ackWait != 0 && have.AckWait != o.ackWait {
		updatable = append(updatable, fmt.Sprintf("ack wait %s, want %s", have.AckWait, o.ackWait))
	}
	if o.maxAckPending != 0 && have.MaxAckPending != o.maxAckPending {
		updatable = append(updatable, fmt.Sprintf("max ack pending %d, want %d", have.MaxAckPending, o.maxAckPending))
	}
	return fixed, updatable
}

// startPosition describes where a consumer configuration starts delivering.
func startPosition(cfg jetstream.ConsumerConfig) string {
	switch cfg.DeliverPolicy {
	case jetstream.DeliverByStartSequencePolicy:
		return fmt.Sprintf("from sequence %d", cfg.OptStartSeq)
	case jetstream.DeliverByStartTimePolicy:
		if cfg.OptStartTime == nil {
			return "from a time"
		}
		return "from " + cfg.OptStartTime.UTC().Format(time.RFC3339Nano)
	default:
		return cfg.DeliverPolicy.String()
	}
}

// setFilters puts filters in cfg: one in FilterSubject, which servers before 2.10 understand
// too, more in FilterSubjects.
func setFilters(cfg *jetstream.ConsumerConfig, filters []string) {
	cfg.FilterSubject, cfg.FilterSubjects = "", nil
	if len(filters) == 1 {
		cfg.FilterSubject = filters[0]
	} else {
		cfg.FilterSubjects = filters
	}
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

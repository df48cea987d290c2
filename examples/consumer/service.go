package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

// retryDelays are the delays before a message is delivered again after the journal could not
// be written (a full or failing disk): quick at first, then long enough not to spin, short
// enough to resume soon after the disk recovers.
var retryDelays = []time.Duration{time.Second, 5 * time.Second}

// service handles the events: one at a time with one durable consumer; with -partitions,
// one at a time per partition, several partitions at once (the journal and the tracker are
// safe for that).
type service struct {
	journal   *journal
	tracker   *consumer.Tracker
	workDelay time.Duration
	log       *zerolog.Logger
	// member is "<index>/<members>" in the partitioned mode, "" otherwise.
	member string
	// namespace, in the partitioned mode, is the only namespace handled ("" every one): the
	// group receives every event of the relay's stream, and the others are skipped.
	namespace string
	// delivered holds, in the partitioned mode, the delivery count of each message in hand by
	// its stream sequence, for its journal entry.
	delivered sync.Map
}

// newService returns the service over an open journal, its tracker rebuilt from the journal:
// the journal is where the work goes, so it is also the record of what was handled.
func newService(ctx context.Context, j *journal, workDelay time.Duration, log *zerolog.Logger) (*service, error) {
	tr := consumer.NewTracker(nil, 0)
	for _, e := range j.Loaded() {
		if err := tr.Record(ctx, e.event()); err != nil {
			return nil, fmt.Errorf("rebuild tracker from journal: %w", err)
		}
	}
	return &service{journal: j, tracker: tr, workDelay: workDelay, log: log}, nil
}

// messageHandler returns the JetStream handler: consumer.Handler around handle, with the
// tracker, so that a change not newer than the one handled for its object (a redelivery
// after a crash, a replay by the relay) is acknowledged and not handled again, a message
// that is not a relay event is terminated, and a failed write is retried.
func (s *service) messageHandler(ctx context.Context) (jetstream.MessageHandler, error) {
	h, err := s.eventHandler(ctx)
	if err != nil || s.member == "" {
		return h, err
	}
	return func(msg jetstream.Msg) {
		md, err := msg.Metadata()
		if err == nil {
			s.delivered.Store(md.Sequence.Stream, md.NumDelivered)
			defer s.delivered.Delete(md.Sequence.Stream)
		}
		h(msg)
	}, nil
}

// eventHandler is consumer.Handler around handle.
func (s *service) eventHandler(ctx context.Context) (jetstream.MessageHandler, error) {
	return consumer.Handler(ctx, s.handle, consumer.TrackWith(s.tracker), consumer.RetryDelays(retryDelays...),
		consumer.OnError(func(msg jetstream.Msg, err error) {
			s.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("event not handled")
		}))
}

// handle writes the event's journal entry: the work and the record that it was done, in one
// synced append, so that no crash can separate them.
func (s *service) handle(ctx context.Context, e consumer.Event) error {
	if s.member != "" && (e.Group != "" || e.Resource != "configmaps" || (s.namespace != "" && e.Namespace != s.namespace)) {
		return nil // not a ConfigMap this service audits
	}
	began := time.Now()
	if s.workDelay > 0 {
		select {
		case <-time.After(s.workDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	en := entryFor(e)
	if s.member != "" {
		en.Member, en.Began = s.member, &began
		if n, ok := s.delivered.Load(e.Sequence); ok {
			en.Delivered = n.(uint64)
		}
	}
	if err := s.journal.Append(en); err != nil {
		return err
	}
	s.log.Debug().Str("id", e.ID()).Uint64("seq", e.Sequence).Str("type", string(e.Type)).
		Str("namespace", e.Namespace).Str("name", e.Name).Str("rv", e.ResourceVersion).Msg("handled")
	return nil
}

// entryFor is the audit record of one change. Every valid event gets one, even when its
// object cannot be read, so that the trail has no gaps.
func entryFor(e consumer.Event) entry {
	en := entry{
		ID:                e.ID(),
		Cluster:           e.Cluster,
		Sequence:          e.Sequence,
		Type:              string(e.Type),
		Origin:            string(e.Origin),
		Namespace:         e.Namespace,
		Name:              e.Name,
		UID:               e.UID,
		ResourceVersion:   e.ResourceVersion,
		BodyOmitted:       e.BodyOmitted,
		FinalStateUnknown: e.FinalStateUnknown,
	}
	if !e.Time.IsZero() {
		t := e.Time
		en.Observed = &t
	}
	cm, err := consumer.DecodeObject[*corev1.ConfigMap](e)
	switch {
	case errors.Is(err, consumer.ErrNoObject):
	case err != nil:
		en.Error = err.Error()
	case !e.FinalStateUnknown: // an inferred delete carries no data
		for k := range cm.Data {
			en.Keys = append(en.Keys, k)
		}
		for k := range cm.BinaryData {
			en.Keys = append(en.Keys, k)
		}
		slices.Sort(en.Keys)
	}
	return en
}

package main

import (
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

// retryDelay is how long a message waits before it is delivered again after the journal could
// not be written (a full or failing disk): long enough not to spin, short enough to resume
// soon after the disk recovers.
const retryDelay = 5 * time.Second

// service handles the events one at a time (the consumer calls handle serially).
type service struct {
	journal   *journal
	workDelay time.Duration
	log       *zerolog.Logger
}

// handle writes one journal entry per event id and acknowledges the message after the entry
// is on disk. A message that is not a relay event is terminated: delivering it again would
// not help.
func (s *service) handle(msg jetstream.Msg) {
	e, err := consumer.Decode(msg)
	if err != nil {
		s.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("not a relay event, terminated")
		_ = msg.TermWithReason("not a kube-nats-relay event")
		return
	}
	log := s.log.With().Str("id", e.ID()).Uint64("seq", e.Sequence).Str("type", string(e.Type)).
		Str("namespace", e.Namespace).Str("name", e.Name).Str("rv", e.ResourceVersion).Logger()
	if s.journal.Has(e.ID()) {
		// Handled before a crash or restart took the acknowledgement with it, or replayed by
		// the relay: acknowledge, do not repeat.
		log.Debug().Msg("already handled")
		s.ack(msg, &log)
		return
	}
	if s.workDelay > 0 {
		time.Sleep(s.workDelay)
	}
	if err := s.journal.Append(entryFor(e)); err != nil {
		log.Error().Err(err).Dur("retry_in", retryDelay).Msg("journal write failed")
		_ = msg.NakWithDelay(retryDelay)
		return
	}
	log.Debug().Msg("handled")
	s.ack(msg, &log)
}

// ack acknowledges msg. A lost acknowledgement only means the event comes again, and is then
// recognised by its id.
func (s *service) ack(msg jetstream.Msg, log *zerolog.Logger) {
	if err := msg.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the event will be delivered again and skipped")
	}
}

// entryFor is the audit record of one change. Every valid event gets one, even when its
// object cannot be read, so that the trail has no gaps.
func entryFor(e consumer.Event) entry {
	en := entry{
		ID:                e.ID(),
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

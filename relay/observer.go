package relay

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Observer is told what a source does, for metrics. A source calls it from its intake and
// pipeline goroutines: its methods must be safe for concurrent use, cheap, and never block.
// A source without an observer reports nothing.
type Observer interface {
	// Published reports an event acknowledged by JetStream.
	Published(p Publication)
	// Noted reports an occurrence that is only counted.
	Noted(n Note)
}

// Publication is one event acknowledged by JetStream.
type Publication struct {
	Type   event.Type
	Origin event.Origin
	// Oversize is set when the event went out without its body: larger than the server's
	// max_payload, or refused with it by the stream (max_msg_size).
	Oversize bool
	// Duplicate is set when JetStream dropped the event as a repeat of an id inside the
	// stream's duplicate window: a replay nobody sees twice.
	Duplicate bool
	// RTT is the publish's round trip, from handing the message to the client to its ack.
	RTT time.Duration
	// Lag is the time from the change's receipt (watch event or list page) to this ack,
	// buffering and retries included.
	Lag time.Duration
}

// Undelivered is a step of a change NATS refused for good (see Refusal): the relay gave it
// up and moved on.
type Undelivered struct {
	Step   Step
	Reason Refusal
}

// UndeliveredObserver is an Observer that also counts undelivered steps; a source's
// observer is asked for it with a type assertion.
type UndeliveredObserver interface {
	Undelivered(u Undelivered)
}

// Note is an occurrence an Observer counts.
type Note int

const (
	// NotePublishFailed is a failed publish attempt of an event, index record or mirror
	// state; the pipeline retries it in order.
	NotePublishFailed Note = iota + 1
	// NotePublishRetried is a failed publish sent again.
	NotePublishRetried
	// NoteInitialSync is a completed first list (no checkpoint).
	NoteInitialSync
	// NoteRelist is a completed relist (after a 410, or an interrupted initial sync).
	NoteRelist
	// NoteExpired is a 410 Gone: the resourceVersion left the server's history.
	NoteExpired
	// NoteReplaySuppressed is a watch event the object index shows was already published.
	NoteReplaySuppressed
	// NoteFilteredNamespace, NoteFilteredEventType, NoteFilteredWhen and NoteFilteredQuiet
	// are changes the rules kept out: an unselected namespace, an event type not published,
	// a when expression that returned false, a quiet update.
	NoteFilteredNamespace
	NoteFilteredEventType
	NoteFilteredWhen
	NoteFilteredQuiet
	// NoteFilterError is a when expression that failed to evaluate (the change is published).
	NoteFilterError
	// NoteAhead is a resourceVersion ahead of the cluster's (checkpoint, object index, or a
	// "too large resource version" answer): etcd was restored or the cluster rebuilt, and a
	// relist follows.
	NoteAhead
	// NoteDeletePublished is a delete the relist diff would have inferred that the stream
	// shows was published already (a crash lost its index record): not published again.
	NoteDeletePublished
	// NoteDerivedPublished is a derived event the stream shows was published already (a
	// crash lost its change's index record): not published again.
	NoteDerivedPublished
	// NoteStreamReadDerived and NoteStreamReadDelete are synchronous reads of the stream's
	// last message on a subject: before a derived event of a change a previous run may have
	// published (see the replay horizon in derivedPublished), and before an inferred delete.
	NoteStreamReadDerived
	NoteStreamReadDelete
	// NoteWatchListFallback is a source in WatchListAuto giving up the streaming list for
	// the rest of the run: the server refused it, answered it as a plain watch, or ended
	// three streams in a row before their initial-events-end bookmark.
	NoteWatchListFallback
)

// filteredNote is the note of a change the rules suppressed for reason.
func filteredNote(reason event.FilterReason) Note {
	switch reason {
	case event.FilterReasonEventType:
		return NoteFilteredEventType
	case event.FilterReasonQuiet:
		return NoteFilteredQuiet
	}
	return NoteFilteredWhen
}

// note reports n to the source's observer, if any.
func (s *Source) note(n Note) {
	if s.obs != nil {
		s.obs.Noted(n)
	}
}

// listNote is the note of a completed list of the given origin.
func listNote(origin event.Origin) Note {
	if origin == event.InitialSync {
		return NoteInitialSync
	}
	return NoteRelist
}

// observe reports the ack of an event step to the pipeline's observer. The type, origin and
// oversize mark come from the event's own headers, so that they are what consumers see.
func (p *pipeline) observe(it *item, ack *jetstream.PubAck, sent time.Time) {
	if p.obs == nil || it.msg == nil {
		return
	}
	now := p.clock.Now()
	pub := Publication{
		Type:     typeOf(it.msg),
		Origin:   event.Origin(it.msg.Header.Get(event.HeaderOrigin)),
		Oversize: oversize(it.msg.Header.Get(event.HeaderBodyOmitted)),
		RTT:      now.Sub(sent),
	}
	if ack != nil {
		pub.Duplicate = ack.Duplicate
	}
	if !it.received.IsZero() {
		pub.Lag = now.Sub(it.received)
	}
	p.obs.Published(pub)
}

// oversize reports whether a body-omitted reason says the body was too large.
func oversize(omitted string) bool {
	return omitted == event.BodyOmittedOversize || omitted == event.BodyOmittedStreamLimit
}

// undelivered reports u to the pipeline's observer, if it counts them.
func (p *pipeline) undelivered(u Undelivered) {
	if o, ok := p.obs.(UndeliveredObserver); ok {
		o.Undelivered(u)
	}
}

// note reports n to the pipeline's observer, if any.
func (p *pipeline) note(n Note) {
	if p.obs != nil {
		p.obs.Noted(n)
	}
}

// typeOf reads the event type from the CloudEvents type header.
func typeOf(msg *nats.Msg) event.Type {
	ce := msg.Header.Get(event.HeaderCEType)
	if len(ce) > len(event.CETypePrefix) {
		return event.Type(ce[len(event.CETypePrefix):])
	}
	return ""
}

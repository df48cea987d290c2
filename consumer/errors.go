package consumer

import "errors"

// Sentinel errors. Every error this package returns for one of these conditions wraps the
// sentinel, so callers classify with errors.Is.
var (
	// ErrInvalidEvent reports a message that is not a valid relay event: headers missing or
	// inconsistent, or a subject that does not match them. Decode errors also wrap the event
	// package's sentinel for the cause (event.ErrInvalidHeader, event.ErrInvalidSubject).
	ErrInvalidEvent = errors.New("invalid event")
	// ErrNoObject reports an event without a body to decode: the relay left it out (see
	// Event.BodyOmitted) or the consumer asked for headers only.
	ErrNoObject = errors.New("event has no object")
	// ErrKindMismatch reports a Go type that is not the type of the object's kind: a
	// ConfigMap decoded as a *appsv1.Deployment (see KindOf).
	ErrKindMismatch = errors.New("type does not fit the object's kind")
	// ErrNotMirrored reports a state mirror key filter that names no resource the mirror
	// holds: the resource is not mirrored, or the filter is misspelled (see Bootstrap).
	ErrNotMirrored = errors.New("no mirrored resource matches")
	// ErrConsumerConflict reports an existing durable consumer whose filters, ack policy,
	// start position, AckWait or MaxAckPending differ from the ones asked for.
	ErrConsumerConflict = errors.New("durable consumer exists with other settings")
	// ErrOverlappingFilters reports two subject filters that select some of the same events
	// while neither selects all of the other's: a JetStream consumer refuses such filters.
	ErrOverlappingFilters = errors.New("subject filters overlap")
	// ErrNotAggregate reports an existing stream that cannot be the aggregate asked for: it
	// captures subjects of its own, mirrors a stream, is sealed, or sources one of the
	// clusters' streams in another way.
	ErrNotAggregate = errors.New("stream is not an aggregate of those sources")
	// ErrNotPartitioned reports a stream that is not the partitioned group asked for: not made
	// by EnsurePartitioned, or made with another source, prefix or partition count.
	ErrNotPartitioned = errors.New("stream is not that partitioned group")
	// ErrSourceNotFound reports a partitioned group whose source stream does not exist: not
	// created yet, misspelled, or in another account or domain.
	ErrSourceNotFound = errors.New("source stream not found")
	// ErrNoStartPosition reports a partitioned group EnsurePartitioned would create without
	// being told where in its source to start: PartitionConfig sets neither StartSequence nor
	// ReplayAll.
	ErrNoStartPosition = errors.New("new partitioned group without a start position")
	// ErrServerTooOld reports a nats-server without a feature asked for: the partitioned
	// group's prioritized pulls need nats-server 2.12 or later.
	ErrServerTooOld = errors.New("nats-server too old")
	// ErrInvalidResourceVersion reports a resourceVersion that is not a decimal integer, so
	// that it cannot be compared with another.
	ErrInvalidResourceVersion = errors.New("invalid resourceVersion")
)

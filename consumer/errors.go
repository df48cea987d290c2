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
	// ErrConsumerConflict reports an existing durable consumer whose filters or ack policy
	// differ from the ones asked for.
	ErrConsumerConflict = errors.New("durable consumer exists with other settings")
)

package relay

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Refusal says why NATS refused a message for good: sending the same message again can only
// fail the same way. Its values are metric labels.
type Refusal string

// The refusals. Every other publish error is transient and retried in order.
const (
	// RefusedTooLarge: the message exceeds the server's max_payload, the stream's (or the
	// bucket's) max_msg_size, the 64 KiB header limit or the store's message size limit.
	RefusedTooLarge Refusal = "too-large"
	// RefusedDenied: the connection's user may not publish to the subject (a permissions
	// violation reported on the connection).
	RefusedDenied Refusal = "denied"
	// RefusedSubjectFull: the stream keeps at most max_msgs_per_subject messages per subject
	// and discards new ones (discard_new_per_subject). It clears only when messages of that
	// subject are removed, which the relay cannot wait for without holding its resource.
	RefusedSubjectFull Refusal = "subject-full"
	// RefusedSubjectTooLong: subject and reply exceed the server's control line limit; the
	// server would close the connection, so the message is never sent.
	RefusedSubjectTooLong Refusal = "subject-too-long"
	// RefusedBadSubject: the client rejects the subject as invalid.
	RefusedBadSubject Refusal = "bad-subject"
	// RefusedRejected: another error about this message's headers (a rollup or message TTL
	// the bucket does not allow).
	RefusedRejected Refusal = "rejected"
)

// Refusals lists every Refusal, for metrics that create their series up front.
var Refusals = []Refusal{RefusedTooLarge, RefusedDenied, RefusedSubjectFull, RefusedSubjectTooLong, RefusedBadSubject, RefusedRejected}

// JetStream API error codes (nats-server's jetstream_errors_generated.go) that refuse one
// message for good. Codes that concern the whole stream or account are left out on purpose:
// a full stream with discard new (10077 "maximum bytes/messages exceeded"), account or
// server storage exhausted (10002, 10023, 10028, 10047), a sealed stream (10109) or
// JetStream disabled can drain or be fixed by the operator, and treating them as permanent
// would give up on every change at once. They are retried, and /readyz reports publishing
// failing; the relay resumes where it stopped once they clear.
const (
	jsErrStoreFailed        jetstream.ErrorCode = 10077 // {err}: see storeRefusals
	jsErrHeaderExceedsMax   jetstream.ErrorCode = 10097
	jsErrRollupFailed       jetstream.ErrorCode = 10111
	jsErrMessageTTLInvalid  jetstream.ErrorCode = 10165
	jsErrMessageTTLDisabled jetstream.ErrorCode = 10166
)

// storeRefusals are the texts of a 10077 (store failed) that refuse this message for good.
// "maximum bytes exceeded" and "maximum messages exceeded" (the stream is full and discards
// new messages) are not among them: the stream can drain.
var storeRefusals = map[string]Refusal{
	"message too large":                     RefusedTooLarge,
	"maximum messages per subject exceeded": RefusedSubjectFull,
}

// errSubjectTooLong is the error of a message never sent because its control line would
// exceed the server's limit.
var errSubjectTooLong = errors.New("subject too long for the server's control line")

// refusalOf returns why err refuses its message for good, or "" when err is transient
// (timeouts, no responders during a leader election, disconnects, full streams, and every
// error not known to concern this message alone).
func refusalOf(err error) Refusal {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errSubjectTooLong):
		return RefusedSubjectTooLong
	case errors.Is(err, ErrPublishDenied):
		return RefusedDenied
	case errors.Is(err, nats.ErrMaxPayload):
		return RefusedTooLarge
	case errors.Is(err, nats.ErrBadSubject):
		return RefusedBadSubject
	}
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return ""
	}
	switch api.ErrorCode {
	case jetstream.JSErrCodeStreamMessageExceedsMaximum, jsErrHeaderExceedsMax:
		return RefusedTooLarge
	case jsErrRollupFailed, jsErrMessageTTLInvalid, jsErrMessageTTLDisabled:
		return RefusedRejected
	case jsErrStoreFailed:
		desc := strings.ToLower(api.Description)
		for text, r := range storeRefusals {
			if strings.Contains(desc, text) {
				return r
			}
		}
	}
	return ""
}

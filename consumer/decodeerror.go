package consumer

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// relayHeaderPrefix starts the name of every Kubernetes header the relay writes (k8s-kind,
// k8s-uid, ...): a message without one is not a relay event at all.
const relayHeaderPrefix = "k8s-"

// decodeError is a decode error whose message is one short line, while errors.Is and
// errors.As still reach every cause.
type decodeError struct {
	msg    string
	causes []error
}

func (e *decodeError) Error() string   { return e.msg }
func (e *decodeError) Unwrap() []error { return e.causes }

// headerError reports the headers of a message that event.MetaFromHeader refused, in one
// line: a message with no k8s-* header is said not to be a relay event, without listing the
// dozen headers it lacks; a relay event with several problems names the first and counts the
// others. The error wraps ErrInvalidEvent and err, with every problem.
func headerError(subject string, h nats.Header, err error) error {
	causes := []error{ErrInvalidEvent, err}
	if !hasRelayHeader(h) {
		return &decodeError{msg: fmt.Sprintf("decode event on %q: not a relay event (no %s* headers)", subject, relayHeaderPrefix), causes: causes}
	}
	problems := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	}
	msg := fmt.Sprintf("decode event on %q: %v: %v", subject, ErrInvalidEvent, problems[0])
	if n := len(problems) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return &decodeError{msg: msg, causes: causes}
}

// hasRelayHeader reports whether h holds a header the relay writes.
func hasRelayHeader(h nats.Header) bool {
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), relayHeaderPrefix) {
			return true
		}
	}
	return false
}

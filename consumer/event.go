package consumer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// finalStateUnknownValue is the only value the relay writes in k8s-final-state-unknown.
const finalStateUnknownValue = "true"

// leftSelectionValue is the only value the relay writes in k8s-left-selection.
const leftSelectionValue = "true"

// Event is one change of one Kubernetes object as the relay published it.
//
// The embedded event.Meta holds the facts of the subject and headers: Cluster, Group,
// Version, Resource, Kind, Namespace ("" when cluster-scoped), Name, UID, ResourceVersion,
// Type (added, modified, deleted), Origin (live, initial-sync, relist), Time (when the
// relay observed the change; zero when unknown) and Derived (the name of a derived event, ""
// for the change's own event; a derived event's other facts are its change's, its Type the
// change's type). Its methods give the event id (ID, the
// message's Nats-Msg-Id and ce-id), GroupVersionResource, GroupVersionKind, APIVersion and
// Subject.
type Event struct {
	event.Meta
	// Prefix is the subject prefix the event was published under, e.g. "kube", so that
	// e.Subject(e.Prefix) is the message's subject.
	Prefix string
	// Sequence is the message's stream sequence; 0 when the message did not come from a
	// JetStream stream (a core NATS subscription).
	Sequence uint64
	// Stored is when the stream stored the message; zero when unknown.
	Stored time.Time
	// Object is the body: the object's JSON, as the resource's rules shaped it (by default
	// without managedFields and the last-applied annotation, Secret values redacted).
	// It is nil when the relay left the body out (BodyOmitted) or the consumer asked for
	// headers only. Decode it with DecodeObject.
	Object json.RawMessage
	// BodyOmitted says why the relay left the body out, e.g. event.BodyOmittedOversize; ""
	// when the body is there. The subject and headers still identify the change: read the
	// object from the API server if it is needed.
	BodyOmitted string
	// OldObject is the previous state of the object as the relay shaped it, for a resource
	// whose rules publish it (payload objectAndOld); nil otherwise, and when the relay did
	// not know it (the first change it saw of the object).
	OldObject json.RawMessage
	// Patch is the JSON merge patch (RFC 7386) from the previous state to Object, for a
	// resource whose rules publish it (payload objectAndPatch); nil otherwise, and when the
	// relay did not know the previous state.
	Patch json.RawMessage
	// Redacted lists the field paths whose values the relay replaced with empty strings
	// (keys kept), e.g. data and stringData of a Secret.
	Redacted []string
	// FinalStateUnknown marks a delete the relay inferred from a relist (Origin relist): the
	// object vanished while nobody watched, so Object holds only apiVersion, kind and the
	// name, namespace, uid and resourceVersion of the last state published.
	FinalStateUnknown bool
	// LeftSelection marks a deleted event of an object that still exists but stopped
	// matching the relay's label or field selector: it left the relayed view, it was not
	// deleted. Should it match again, it comes back as added.
	LeftSelection bool
}

// Decode returns the Event a JetStream message carries, with its stream sequence and time.
// Every value is exact, whatever bytes a name holds. A namespace or name too long for a header
// (over event.MaxHeaderValueLen once encoded) comes in the hashed form; Decode takes the exact
// value from the object's metadata in the body, checked against the header's digest. Without
// a body (omitted, or a headers-only consumer) such an Event holds the readable start of the
// value and its digest (Event.Exact reports false).
// Errors wrap ErrInvalidEvent: the message is not a relay event, and redelivering it will not
// help.
func Decode(msg jetstream.Msg) (Event, error) {
	e, err := decode(msg.Subject(), msg.Headers(), msg.Data())
	if err != nil {
		return Event{}, err
	}
	if md, err := msg.Metadata(); err == nil {
		e.Sequence, e.Stored = md.Sequence.Stream, md.Timestamp
	}
	return e, nil
}

// DecodeMsg is Decode for a *nats.Msg: one from a core NATS subscription (Sequence is then
// 0), or one delivered by nats.go's older JetStream API (with its stream sequence).
func DecodeMsg(msg *nats.Msg) (Event, error) {
	e, err := decode(msg.Subject, msg.Header, msg.Data)
	if err != nil {
		return Event{}, err
	}
	if md, err := msg.Metadata(); err == nil {
		e.Sequence, e.Stored = md.Sequence.Stream, md.Timestamp
	}
	return e, nil
}

// DecodeRaw is Decode for a message read directly from a stream (jetstream.Stream.GetMsg,
// GetLastMsgForSubject).
func DecodeRaw(msg *jetstream.RawStreamMsg) (Event, error) {
	e, err := decode(msg.Subject, msg.Header, msg.Data)
	if err != nil {
		return Event{}, err
	}
	e.Sequence, e.Stored = msg.Sequence, msg.Time
	return e, nil
}

// decode checks the headers and the subject against each other and fills an Event.
func decode(subject string, h nats.Header, data []byte) (Event, error) {
	m, err := event.MetaFromHeader(h)
	if err != nil {
		return Event{}, headerError(subject, h, err)
	}
	prefix, err := subjectPrefix(subject, m)
	if err != nil {
		return Event{}, fmt.Errorf("decode event on %q: %w: %w", subject, ErrInvalidEvent, err)
	}
	e := Event{
		Meta:              m,
		Prefix:            prefix,
		BodyOmitted:       headerText(h.Get(event.HeaderBodyOmitted)),
		FinalStateUnknown: h.Get(event.HeaderFinalStateUnknown) == finalStateUnknownValue,
		LeftSelection:     h.Get(event.HeaderLeftSelection) == leftSelectionValue,
	}
	if r := headerText(h.Get(event.HeaderRedacted)); r != "" {
		e.Redacted = strings.Split(r, ",")
	}
	if e.BodyOmitted != "" || len(data) == 0 {
		return e, nil
	}
	if err := decodeBody(&e, h.Get(event.HeaderPayload), data); err != nil {
		return Event{}, fmt.Errorf("decode event on %q: %w: %w", subject, ErrInvalidEvent, err)
	}
	if err := exactIdentity(&e); err != nil {
		return Event{}, fmt.Errorf("decode event on %q: %w: %w", subject, ErrInvalidEvent, err)
	}
	return e, nil
}

// decodeBody fills e's Object, OldObject and Patch from the body.
func decodeBody(e *Event, payload string, data []byte) error {
	switch event.Payload(payload) {
	case event.PayloadObject:
		e.Object = json.RawMessage(data)
	case event.PayloadObjectAndOld, event.PayloadObjectAndPatch:
		var body struct {
			Object    json.RawMessage `json:"object"`
			OldObject json.RawMessage `json:"oldObject"`
			Patch     json.RawMessage `json:"patch"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			return fmt.Errorf("body of payload %s: %w", payload, err)
		}
		e.Object, e.OldObject, e.Patch = body.Object, nonNull(body.OldObject), nonNull(body.Patch)
	default:
		return fmt.Errorf("unknown %s %q", event.HeaderPayload, payload)
	}
	return nil
}

// exactIdentity completes a namespace or name that the headers held in the hashed form (too
// long for a header, see event.HeaderValue) from the object's metadata, once checked against
// the header's digest and readable start. Without a body the Event keeps the start and the
// digest (Event.Exact is false).
func exactIdentity(e *Event) error {
	if e.Exact() || e.Object == nil {
		return nil
	}
	var obj struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(e.Object, &obj); err != nil {
		return fmt.Errorf("object metadata: %w", err)
	}
	for _, f := range []struct {
		header      string
		dst, digest *string
		body        string
	}{
		{event.HeaderNamespace, &e.Namespace, &e.Digests.Namespace, obj.Metadata.Namespace},
		{event.HeaderName, &e.Name, &e.Digests.Name, obj.Metadata.Name},
	} {
		if *f.digest == "" {
			continue
		}
		if event.Digest(f.body) != *f.digest || !strings.HasPrefix(f.body, *f.dst) {
			return fmt.Errorf("%s in the hashed form does not name the object's metadata: %w", f.header, event.ErrInvalidHeader)
		}
		*f.dst, *f.digest = f.body, ""
	}
	return nil
}

// nonNull returns nil for an absent or JSON null value.
func nonNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}

// subjectPrefix returns the prefix under which subject is the subject m describes. Every
// token after the prefix is determined by m, so the subject either ends with exactly those
// tokens after a valid prefix, or does not belong to these headers.
func subjectPrefix(subject string, m event.Meta) (string, error) {
	// A one-token placeholder prefix yields every token after it, with the leading dot.
	const placeholder = "p"
	tail := strings.TrimPrefix(m.Subject(placeholder).String(), placeholder)
	prefix, ok := strings.CutSuffix(subject, tail)
	if !ok {
		return "", fmt.Errorf("subject does not match the headers, want <prefix>%s: %w", tail, event.ErrInvalidSubject)
	}
	if err := event.ValidatePrefix(prefix); err != nil {
		return "", fmt.Errorf("subject prefix: %w: %w", event.ErrInvalidSubject, err)
	}
	return prefix, nil
}

// headerText reads a header the relay percent-encodes but that only informs (the reason a
// body was omitted, the redacted paths): decoded once, or as it is when it does not decode (a
// value an older relay wrote unencoded, with a '%' of its own).
func headerText(raw string) string {
	if v, err := event.DecodeHeaderValue(raw); err == nil {
		return v
	}
	return raw
}

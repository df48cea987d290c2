package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Message is one message of a relay's stream, as read back.
type Message struct {
	// Seq is the stream sequence; 0 when the message was not read by sequence.
	Seq     uint64
	Subject string
	Header  nats.Header
	// Meta is what the headers say.
	Meta event.Meta
	// Body is the body's JSON decoded, nil when the message has none.
	Body map[string]any
}

// Decode builds the Message of a stream message: its headers must decode as event.Meta and
// its body, when it has one, as a JSON object.
func Decode(seq uint64, subject string, header nats.Header, data []byte) (Message, error) {
	m := Message{Seq: seq, Subject: subject, Header: header}
	var err error
	if m.Meta, err = event.MetaFromHeader(header); err != nil {
		return Message{}, fmt.Errorf("message %d on %s: bad headers: %w", seq, subject, err)
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &m.Body); err != nil {
			return Message{}, fmt.Errorf("message %d: body is not JSON: %w", seq, err)
		}
	}
	return m, nil
}

// ReadStream returns every message of stream, in order; nil when the stream does not exist
// (yet).
func ReadStream(ctx context.Context, js jetstream.JetStream, stream string) ([]Message, error) {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	var out []Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("get message %d: %w", seq, err)
		}
		m, err := Decode(seq, raw.Subject, raw.Header, raw.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Key is the object's namespace/name, or its name when it is cluster-scoped.
func (m Message) Key() string {
	if m.Meta.Namespace == "" {
		return m.Meta.Name
	}
	return m.Meta.Namespace + "/" + m.Meta.Name
}

// String describes the message in one line, for problems and logs.
func (m Message) String() string {
	s := fmt.Sprintf("seq %d: %s %s uid=%s rv=%s origin=%s", m.Seq, m.Meta.Type, m.Key(), m.Meta.UID, m.Meta.ResourceVersion, m.Meta.Origin)
	if m.Header.Get(event.HeaderFinalStateUnknown) != "" {
		s += " final-state-unknown"
	}
	if o := m.Header.Get(event.HeaderBodyOmitted); o != "" {
		s += " body-omitted=" + o
	}
	return s
}

// InferredDelete reports whether m is a delete the relay inferred from a relist.
func (m Message) InferredDelete() bool {
	return m.Meta.Type == event.Deleted && m.Meta.Origin == event.Relist
}

// ParseRV returns a resourceVersion as the integer it is; false when it is not one.
func ParseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// ByObject groups messages by Key, in stream order.
func ByObject(msgs []Message) map[string][]Message {
	out := make(map[string][]Message)
	for _, m := range msgs {
		out[m.Key()] = append(out[m.Key()], m)
	}
	return out
}

// Stats summarises messages in one line for a log.
func Stats(msgs []Message) string {
	byType := map[event.Type]int{}
	byOrigin := map[event.Origin]int{}
	omitted, unknown := 0, 0
	for _, m := range msgs {
		byType[m.Meta.Type]++
		byOrigin[m.Meta.Origin]++
		if m.Header.Get(event.HeaderBodyOmitted) != "" {
			omitted++
		}
		if m.Header.Get(event.HeaderFinalStateUnknown) != "" {
			unknown++
		}
	}
	return fmt.Sprintf("%d messages: added %d, modified %d, deleted %d; live %d, initial-sync %d, relist %d; body omitted %d, final-state-unknown %d",
		len(msgs), byType[event.Added], byType[event.Modified], byType[event.Deleted],
		byOrigin[event.Live], byOrigin[event.InitialSync], byOrigin[event.Relist], omitted, unknown)
}

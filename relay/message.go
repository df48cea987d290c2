package relay

import (
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// StateMirror keeps the current state of every object of a mirrored resource.
type StateMirror interface {
	// Record returns the message setting the object's state to body (nil: the object is
	// gone); the pipeline publishes it before the event.
	Record(meta event.Meta, body []byte) *nats.Msg
}

// meta is the identity of a change of obj, read before the rules shape it.
func (s *Source) meta(obj *unstructured.Unstructured, t event.Type, origin event.Origin) event.Meta {
	return event.Meta{
		Cluster:         s.cfg.Cluster,
		Group:           s.cfg.Resource.Group,
		Version:         s.cfg.Resource.Version,
		Resource:        s.cfg.Resource.Resource,
		Kind:            s.cfg.Resource.Kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             string(obj.GetUID()),
		ResourceVersion: obj.GetResourceVersion(),
		Type:            t,
		Origin:          origin,
		Time:            s.clock.Now(),
		History:         s.history.Load(),
	}
}

// message builds the JetStream message for a change (shaped is the object as published, old
// its previous shaped state or nil; body, when not nil, is the object's JSON read as is and
// published instead of encoding shaped), and the state mirror's record of it when the source is
// mirrored.
func (s *Source) message(meta event.Meta, shaped, old map[string]any, body []byte, marks eventMarks) (msg, mirror *nats.Msg, omitted bool) {
	msg = &nats.Msg{Subject: meta.Subject(s.cfg.Prefix).String(), Header: meta.Header()}
	if marks.finalStateUnknown {
		msg.Header.Set(event.HeaderFinalStateUnknown, "true")
	}
	if marks.leftSelection {
		msg.Header.Set(event.HeaderLeftSelection, "true")
	}
	var payload event.Payload
	var err error
	if body == nil {
		body, payload, err = s.rules.Body(shaped, old)
	}
	if err == nil {
		// The headers that go with the body count toward the size limit.
		if payload != event.PayloadObject {
			msg.Header.Set(event.HeaderPayload, string(payload))
		}
		if s.cfg.Redacted != "" {
			msg.Header.Set(event.HeaderRedacted, event.EncodeHeaderValue(s.cfg.Redacted))
		}
		// The schema describes the object, not a body that wraps it with its old state.
		if s.cfg.DataSchema != "" && payload == event.PayloadObject {
			// A URI in RFC 3986 ASCII already: percent-encoding it again would name another.
			msg.Header.Set(event.HeaderCEDataSchema, s.cfg.DataSchema)
		}
	}
	switch {
	case err != nil:
		// An object decoded from JSON always encodes again; keep the event without body.
		msg.Header.Set(event.HeaderBodyOmitted, event.EncodeHeaderValue("encode: "+err.Error()))
		omitted = true
	case s.cfg.MaxPayload > 0 && len(body)+event.HeaderSize(msg.Header)+len(msg.Subject) > s.cfg.MaxPayload:
		msg.Header.Del(event.HeaderPayload)
		msg.Header.Del(event.HeaderRedacted)
		msg.Header.Del(event.HeaderCEDataSchema)
		msg.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
		omitted = true
	default:
		msg.Data = body
	}
	if s.mirror == nil {
		return msg, nil, omitted
	}
	switch {
	case meta.Type == event.Deleted:
		mirror = s.mirror.Record(meta, nil)
	case omitted:
		// Too large for the bucket as well: keep the object's identity, like the event.
		ref, _ := s.tombstone(metaKey(meta), entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion}).MarshalJSON()
		mirror = s.mirror.Record(meta, ref)
	case payload != event.PayloadObject:
		// The body wraps the object with its old state or a patch: the mirror keeps only
		// the object.
		state, err := json.Marshal(shaped)
		if err != nil {
			state, _ = s.tombstone(metaKey(meta), entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion}).MarshalJSON()
		}
		mirror = s.mirror.Record(meta, state)
	default:
		mirror = s.mirror.Record(meta, msg.Data)
	}
	return msg, mirror, omitted
}

// record returns the durable index record of a change (held: the state conditions that
// hold after it, joined), nil without a durable index.
func (s *Source) record(object, uid, rv, held string) *nats.Msg {
	if s.objIdx == nil {
		return nil
	}
	return s.objIdx.Record(s.key, object, uid, rv, heldNames(held))
}

// tombstone is the body of an inferred delete: the object's last known identity.
func (s *Source) tombstone(key string, prev entry) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(s.cfg.Resource.GroupVersion().String())
	obj.SetKind(s.cfg.Resource.Kind)
	ns, name, found := strings.Cut(key, "/")
	if !found {
		ns, name = "", key
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetUID(types.UID(prev.UID))
	obj.SetResourceVersion(prev.ResourceVersion)
	return obj
}

// withID gives a mirror or index record the message id of its change's event (published or
// not), suffixed by kind, so that a copy delivered late after a reconnect is dropped by the
// bucket's duplicate window instead of overwriting a newer value. An index journal (see
// IndexJournal) writes a record's key and value into a segment and drops the id: a segment
// is written create-only instead.
func withID(record *nats.Msg, eventID, kind string) *nats.Msg {
	if record == nil {
		return nil
	}
	if record.Header == nil {
		record.Header = nats.Header{}
	}
	record.Header.Set(nats.MsgIdHdr, eventID+":"+kind)
	return record
}

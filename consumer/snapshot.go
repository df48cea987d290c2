package consumer

import (
	"encoding/json"
	"fmt"
)

// Snapshot is the state mirror's content together with the point of the event stream to
// follow it from. The relay writes an object's mirror entry before publishing its event, so
// every change that is not in Entries has its event at or after NextSequence. Events from
// NextSequence on may repeat states already in Entries: apply them as upserts keyed by uid,
// ignoring a resourceVersion not newer than the one held (Entry.ResourceVersion and
// event.Meta.ResourceVersion, compared as integers for one resource).
type Snapshot struct {
	// Entries holds every mirrored object the key filters matched, in key order.
	Entries []Entry
	// Objects maps each mirrored object's key (event.MirrorKey) to its JSON state.
	//
	// Deprecated: use Entries, which carry the object's identity, or Objects[T].
	Objects map[string][]byte
	// NextSequence is the stream sequence to start following from (DeliverFromSequence).
	NextSequence uint64
}

// Entry is one object of a Snapshot: its key, the identity read once from its metadata, and
// its state as the relay shaped it (the body of its last event).
type Entry struct {
	// Key is the object's key in the mirror bucket (event.MirrorKey). A very long name is
	// hashed in the key: Namespace and Name are exact.
	Key string
	// APIVersion and Kind are the object's, e.g. "apps/v1" and "Deployment".
	APIVersion, Kind string
	// Namespace ("" when cluster-scoped), Name, UID and ResourceVersion are the object's
	// metadata.
	Namespace, Name, UID, ResourceVersion string
	// Revision is the entry's revision in the bucket.
	Revision uint64
	// Object is the object's JSON. When StateOmitted it holds only the identity.
	Object json.RawMessage
	// StateOmitted marks an object whose state was too large for the bucket: the mirror
	// keeps only its apiVersion, kind, namespace, name, uid and resourceVersion. Read it
	// from the API server if it is needed.
	StateOmitted bool
}

// identityFields are the only fields of a mirror value that holds an object's identity in
// place of its state (the relay's reference for a state too large for the bucket). An object
// of the API server always has more (metadata.creationTimestamp at least), unless the
// resource's rules prune everything else, when the state and the identity are the same.
var identityFields = map[string]map[string]bool{
	"apiVersion": nil, "kind": nil,
	"metadata": {"namespace": true, "name": true, "uid": true, "resourceVersion": true},
}

// newEntry reads the identity of the object in a mirror value: the fields the value lacks
// stay empty (the relay writes them all), a value that is not a JSON object fails.
func newEntry(key string, revision uint64, value []byte) (Entry, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(value, &obj); err != nil {
		return Entry{}, fmt.Errorf("mirror entry %s: %w", key, err)
	}
	var meta map[string]json.RawMessage
	if m, ok := obj["metadata"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return Entry{}, fmt.Errorf("mirror entry %s: metadata: %w", key, err)
		}
	}
	e := Entry{Key: key, Revision: revision, Object: value, StateOmitted: true}
	for _, f := range []struct {
		fields map[string]json.RawMessage
		name   string
		dst    *string
	}{
		{obj, "apiVersion", &e.APIVersion}, {obj, "kind", &e.Kind},
		{meta, "namespace", &e.Namespace}, {meta, "name", &e.Name},
		{meta, "uid", &e.UID}, {meta, "resourceVersion", &e.ResourceVersion},
	} {
		if v, ok := f.fields[f.name]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return Entry{}, fmt.Errorf("mirror entry %s: %s: %w", key, f.name, err)
			}
		}
	}
	for k := range obj {
		if _, ok := identityFields[k]; !ok {
			e.StateOmitted = false
		}
	}
	for k := range meta {
		if !identityFields["metadata"][k] {
			e.StateOmitted = false
		}
	}
	return e, nil
}

// DecodeEntry decodes the entry's object into a new T, as DecodeObject decodes an event's:
// ErrKindMismatch when T is the type of another kind, ErrNoObject when the mirror holds
// only the object's identity (StateOmitted).
func DecodeEntry[T any](e Entry) (T, error) {
	if e.StateOmitted {
		var zero T
		return zero, fmt.Errorf("decode mirror entry %s: %w (state too large for the bucket, only the identity kept)", e.Key, ErrNoObject)
	}
	obj, err := decodeKind[T](e.Kind, e.Object)
	if err != nil {
		return obj, fmt.Errorf("decode mirror entry %s: %w", e.Key, err)
	}
	return obj, nil
}

// Objects decodes every entry of the snapshot into a T (DecodeEntry), in key order. It
// fails on the first entry that does not decode: filter the snapshot on one kind, and use
// Entries and DecodeEntry to handle an entry whose state was omitted.
func Objects[T any](s Snapshot) ([]T, error) {
	out := make([]T, 0, len(s.Entries))
	for _, e := range s.Entries {
		obj, err := DecodeEntry[T](e)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

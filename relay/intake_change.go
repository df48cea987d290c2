package relay

import (
	"context"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// shapedCache holds the shaped state of every relayed object of a source whose Rules need
// the previous state (NeedsOld); sources without such rules have none. It is owned by the
// intake goroutine.
type shapedCache map[string]map[string]any

// change publishes a live event unless the index shows it was already taken or the rules
// filter it.
func (in *intake) change(ctx context.Context, obj object, typ watch.EventType) error {
	key := objectKey(obj.Unstructured)
	uid, rv := string(obj.GetUID()), obj.GetResourceVersion()
	prev, indexed := in.index.get(key)
	if indexed && prev.covers(uid, rv) {
		in.log.Debug().Str("key", key).Str("rv", rv).Msg("replay suppressed")
		in.src.note(NoteReplaySuppressed)
		in.refresh(obj)
		return in.mark(ctx, rv)
	}
	t := event.Modified
	var marks eventMarks
	switch typ {
	case watch.Added:
		t = event.Added
		if indexed && prev.UID != uid {
			// The old object's DELETED was never seen (it cannot be, on a live watch); keep
			// the index honest for the relist diff; the cached state was the old object's.
			in.index.remove(key)
			indexed = false
			delete(in.cache, key)
		}
	case watch.Deleted:
		t = event.Deleted
		if indexed || in.selected(obj.GetNamespace()) {
			// Read before anything changes: on an error the watch ends before this event
			// and the next one delivers it again.
			left, err := in.leftSelection(ctx, obj)
			if err != nil {
				return err
			}
			marks.leftSelection = left
		}
	}
	return in.offerMarked(ctx, obj, t, event.Live, rv, indexed, marks)
}

// offer runs a change through the source's selection and rules and queues what follows:
// the event (with its index record and mirror state), only a record when a suppressed
// delete leaves the index, or only a checkpoint mark. indexed says whether the object has
// an entry in the index (published before, or known from a skipped initial sync); a delete
// of such an object is relayed even when its namespace is no longer selected, so that
// consumers never keep an object that is gone. checkpointRV is as for emit.
func (in *intake) offer(ctx context.Context, obj object, t event.Type, origin event.Origin, checkpointRV string, indexed bool) error {
	return in.offerMarked(ctx, obj, t, origin, checkpointRV, indexed, eventMarks{})
}

// offerMarked is offer for a change whose event carries marks.
func (in *intake) offerMarked(ctx context.Context, obj object, t event.Type, origin event.Origin, checkpointRV string, indexed bool, marks eventMarks) error {
	key := objectKey(obj.Unstructured)
	if ns := obj.GetNamespace(); !in.selected(ns) && (t != event.Deleted || !indexed) {
		if in.cache != nil {
			delete(in.cache, key)
		}
		in.noteDropped(ns)
		in.src.note(NoteFilteredNamespace)
		return in.markIf(ctx, checkpointRV)
	}
	meta := in.src.meta(obj.Unstructured, t, origin)
	shaped := in.shape(obj)
	var old map[string]any
	if in.cache != nil {
		old = in.cache[key]
		if t == event.Deleted {
			delete(in.cache, key)
		} else {
			in.cache[key] = shaped
		}
	}
	c := Change{Type: t, Origin: origin, Object: shaped, Old: old}
	v := in.src.rules.Decide(c)
	if v.Err != nil {
		in.src.note(NoteFilterError)
	}
	if v.Err != nil && v.FirstError {
		in.log.Error().Err(v.Err).Str("key", key).Str("rv", meta.ResourceVersion).
			Msg("filter expression failed: publishing the change; further failures of this rule are only counted")
	}
	prev, _ := in.index.get(key)
	fired, heldBefore, held, learned := in.derive(c, key, meta.UID, prev, indexed)
	var since entry // the index record before the change, when of the same object
	if indexed && prev.UID == meta.UID {
		since = prev
	}
	if len(fired) > 0 && t != event.Added && (!indexed || prev.UID != meta.UID) && in.changeReplayed(ctx, meta) {
		// A replay of a change handled before a crash, whose object the index no longer
		// holds: what it derived is published. Not for an added: no state condition held
		// before it, so it fires what it fired the first time, and derivedMessages leaves
		// out each one the stream holds. Its own event in the stream does not say that its
		// derived events are: a relay killed (or a leader that died) between the two
		// leaves the event without them and without the index record.
		fired = nil
	}
	if !v.Publish {
		in.src.note(filteredNote(v.Reason))
		in.log.Debug().Str("type", string(t)).Str("key", key).Str("rv", meta.ResourceVersion).Str("reason", string(v.Reason)).Msg("change filtered")
		if t == event.Deleted && indexed {
			// The object leaves the index (and the mirror) without an event, so that a
			// relist does not infer its delete later.
			in.index.remove(key)
			id := meta.ID()
			it := &item{key: key, index: withID(in.src.record(key, "", "", ""), id, "index"), rv: checkpointRV}
			if in.src.mirror != nil {
				it.mirror = withID(in.src.mirror.Record(meta, nil), id, "mirror")
			}
			if len(fired) > 0 {
				base, _, _ := in.src.message(meta, shaped, old, obj.Body, marks)
				it.derived = in.derivedMessages(ctx, meta, base, fired, since, "")
			}
			if it.current() == nil && checkpointRV == "" {
				return nil
			}
			return in.send(ctx, it)
		}
		if t == event.Deleted && len(fired) > 0 {
			// A filtered delete of an object the index does not hold (a replay after its
			// index removal was written, a relay before this one did not record the
			// objects its derived rules saw, or the index was purged): derived with the
			// conditions of its last state held (see derive), as a published delete of
			// such an object is, so that only what the delete makes hold fires.
			base, _, _ := in.src.message(meta, shaped, old, obj.Body, marks)
			it := &item{key: key, derived: in.derivedMessages(ctx, meta, base, fired, since, ""), rv: checkpointRV}
			if it.current() == nil && checkpointRV == "" {
				return nil
			}
			return in.send(ctx, it)
		}
		if t != event.Deleted && (len(fired) > 0 || held != heldBefore || learned || in.derives() && since.UID == "") {
			// The change publishes derived events, or a state condition rose or fell: the
			// index records it, so that neither a replay nor a relist fires again. An object
			// the index does not hold is recorded too when the source derives events, so
			// that a replay of its next change knows which state conditions held before it
			// (none, for a new object) instead of finding an object it cannot place; and an
			// entry that did not know some state conditions (learned) records them now.
			in.index.put(key, entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion, Held: held})
			id := meta.ID()
			it := &item{key: key, index: withID(in.src.record(key, meta.UID, meta.ResourceVersion, held), id, "index"), rv: checkpointRV}
			if len(fired) > 0 {
				base, _, _ := in.src.message(meta, shaped, old, obj.Body, marks)
				it.derived = in.derivedMessages(ctx, meta, base, fired, since, held)
			}
			if it.current() == nil && checkpointRV == "" {
				return nil
			}
			return in.send(ctx, it)
		}
		return in.markIf(ctx, checkpointRV)
	}
	if t == event.Deleted {
		in.index.remove(key)
	} else {
		in.index.put(key, entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion, Held: held})
	}
	return in.emitShaped(ctx, meta, shaped, old, obj.Body, checkpointRV, marks, fired, since, held)
}

// emitShaped queues the event of a change that passed the rules, with its derived events
// (fired) and held, the state conditions that hold after it, for the index record; since is
// the object's index record before the change when of the same object (uid); body is the
// object's JSON read as is (nil: the rules encode shaped); checkpointRV is the
// resourceVersion the checkpoint may move to once it is acked (empty for list items).
func (in *intake) emitShaped(ctx context.Context, meta event.Meta, shaped, old map[string]any, body []byte, checkpointRV string, marks eventMarks, fired []DerivedEvent, since entry, held string) error {
	msg, mirror, omitted := in.src.message(meta, shaped, old, body, marks)
	id := msg.Header.Get(nats.MsgIdHdr)
	key := metaKey(meta)
	var record *nats.Msg
	if meta.Type == event.Deleted {
		record = in.src.record(key, "", "", "")
	} else {
		record = in.src.record(key, meta.UID, meta.ResourceVersion, held)
	}
	if omitted {
		in.log.Warn().Str("key", key).Str("rv", meta.ResourceVersion).Str("reason", msg.Header.Get(event.HeaderBodyOmitted)).
			Msg("publishing a reference without body")
	}
	in.log.Debug().Str("type", string(meta.Type)).Str("origin", string(meta.Origin)).Str("key", key).
		Str("rv", meta.ResourceVersion).Int("derived", len(fired)).Msg("event")
	it := &item{key: key, msg: msg, mirror: withID(mirror, id, "mirror"), index: withID(record, id, "index"), rv: checkpointRV}
	if len(fired) > 0 {
		it.derived = in.derivedMessages(ctx, meta, msg, fired, since, held)
	}
	it.refusedIndex = in.refusedRecord(key, meta, since, held, id)
	return in.send(ctx, it)
}

// emitUnpublished records obj in the durable index and the state mirror without publishing an
// event: an initial sync that skips publishing still knows the (selected) objects, so that a
// later relist neither re-announces them nor misses their deletes.
func (in *intake) emitUnpublished(ctx context.Context, obj object) error {
	if !in.selected(obj.GetNamespace()) {
		return nil
	}
	key := objectKey(obj.Unstructured)
	meta := in.src.meta(obj.Unstructured, event.Added, event.InitialSync)
	shaped := in.shape(obj)
	if in.cache != nil {
		in.cache[key] = shaped
	}
	// The state conditions that hold are recorded, without publishing their events: the
	// sync that publishes nothing announces no transition either, and the object's next
	// change fires only what starts to hold then.
	_, _, held, _ := in.derive(Change{Type: event.Added, Origin: event.InitialSync, Object: shaped}, key, meta.UID, entry{}, false)
	in.index.put(key, entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion, Held: held})
	id := meta.ID()
	it := &item{key: key, index: withID(in.src.record(key, meta.UID, meta.ResourceVersion, held), id, "index")}
	if in.src.mirror != nil {
		// Only the mirror's record is wanted; the event is built because the record is
		// derived from the same shaping and size limit.
		_, mirror, _ := in.src.message(meta, shaped, nil, obj.Body, eventMarks{})
		it.mirror = withID(mirror, id, "mirror")
	}
	if it.current() == nil {
		return nil
	}
	return in.send(ctx, it)
}

// emitInferredDeleteMarked queues a DELETED for an object that vanished while nobody watched:
// its last known identity, with marks (final-state-unknown). The rules' event-type filter and
// expression apply; namespace selection does not (the object was relayed).
func (in *intake) emitInferredDeleteMarked(ctx context.Context, key string, prev entry, marks eventMarks) error {
	obj := in.src.tombstone(key, prev)
	in.index.remove(key)
	var old map[string]any
	if in.cache != nil {
		old = in.cache[key]
		delete(in.cache, key)
	}
	meta := in.src.meta(obj, event.Deleted, event.Relist)
	if h, body, ok := in.deletePublished(ctx, meta); ok {
		// Published before a crash that lost its index record: write only the record, and
		// the delete's derived events the crash may have kept from being published.
		in.src.note(NoteDeletePublished)
		in.log.Info().Str("key", key).Str("uid", prev.UID).Msg("delete already published: not inferred again")
		it := &item{key: key, index: withID(in.src.record(key, "", "", ""), h.Get(nats.MsgIdHdr), "index")}
		it.derived = in.publishedDeleteDerived(ctx, key, meta, prev, old, h, body)
		if it.current() == nil {
			return nil
		}
		return in.send(ctx, it)
	}
	// Filters see the last state the relay saw when it has one; the body stays the identity.
	last := obj.Object
	if old != nil {
		last = old
	}
	c := Change{Type: event.Deleted, Origin: event.Relist, Object: last, Old: old}
	v := in.src.rules.Decide(c)
	fired, _, _, _ := in.derive(c, key, prev.UID, prev, true)
	if !v.Publish {
		id := meta.ID()
		it := &item{key: key, index: withID(in.src.record(key, "", "", ""), id, "index")}
		if in.src.mirror != nil {
			it.mirror = withID(in.src.mirror.Record(meta, nil), id, "mirror")
		}
		if len(fired) > 0 {
			base, _, _ := in.src.message(meta, obj.Object, old, nil, marks)
			it.derived = in.derivedMessages(ctx, meta, base, fired, prev, "")
		}
		if it.current() == nil {
			return nil
		}
		return in.send(ctx, it)
	}
	in.log.Debug().Str("key", key).Str("uid", prev.UID).Msg("inferred delete")
	return in.emitShaped(ctx, meta, obj.Object, old, nil, "", marks, fired, prev, "")
}

// selected reports whether objects in namespace ns are relayed under the source's namespace
// rules (always, without any).
func (in *intake) selected(ns string) bool {
	nr := in.src.nsRules
	if nr == nil || ns == "" {
		return true
	}
	var labels map[string]string
	if in.src.namespaces != nil {
		labels, _ = in.src.namespaces.Labels(ns)
	}
	return nr.Namespace(ns, labels)
}

// shape returns obj as the rules publish it. An object read as is keeps its identity-only
// Object: its body is published as read, and the rules that allow it decide without more.
func (in *intake) shape(obj object) map[string]any {
	if obj.Body != nil {
		return obj.Object
	}
	return in.src.rules.Shape(obj.Object)
}

// refresh keeps the cache of previous states current for a change that is not offered (a
// replay the index covers, an object a list found unchanged): the cache then holds what the
// relay saw last even when the index ran ahead of the checkpoint.
func (in *intake) refresh(obj object) {
	if in.cache == nil || !in.selected(obj.GetNamespace()) {
		return
	}
	key := objectKey(obj.Unstructured)
	if old, ok := in.cache[key]; ok && !rvLess(shapedRV(old), obj.GetResourceVersion()) {
		return // the cache is as new already (a catch-up read ahead of the watch)
	}
	in.cache[key] = in.shape(obj)
}

// shapedRV reads metadata.resourceVersion of a shaped object ("" when absent).
func shapedRV(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}

// markIf queues a checkpoint mark at rv unless rv is empty (list items do not move the
// checkpoint).
func (in *intake) markIf(ctx context.Context, rv string) error {
	if rv == "" {
		return nil
	}
	return in.mark(ctx, rv)
}

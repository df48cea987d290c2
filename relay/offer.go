package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// errNeedRelist asks the intake to relist: a namespace catch-up failed.
var errNeedRelist = errors.New("relist needed")

// shapedCache holds the shaped state of every relayed object of a source whose Rules need
// the previous state (NeedsOld); sources without such rules have none. It is owned by the
// intake goroutine.
type shapedCache map[string]map[string]any

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
	v := in.src.rules.Decide(Change{Type: t, Origin: origin, Object: shaped, Old: old})
	if v.Err != nil {
		in.src.note(NoteFilterError)
	}
	if v.Err != nil && v.FirstError {
		in.log.Error().Err(v.Err).Str("key", key).Str("rv", meta.ResourceVersion).
			Msg("filter expression failed: publishing the change; further failures of this rule are only counted")
	}
	if !v.Publish {
		in.src.note(filteredNote(v.Reason))
		in.log.Debug().Str("type", string(t)).Str("key", key).Str("rv", meta.ResourceVersion).Str("reason", v.Reason).Msg("change filtered")
		if t == event.Deleted && indexed {
			// The object leaves the index (and the mirror) without an event, so that a
			// relist does not infer its delete later.
			in.index.remove(key)
			id := meta.ID()
			it := &item{key: key, index: withID(in.src.record(key, "", ""), id, "index"), rv: checkpointRV}
			if in.src.mirror != nil {
				it.mirror = withID(in.src.mirror.Record(meta, nil), id, "mirror")
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
		in.index.put(key, entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion})
	}
	return in.emitShaped(ctx, meta, shaped, old, obj.body, checkpointRV, marks)
}

// shape returns obj as the rules publish it. An object read as is keeps its identity-only
// Object: its body is published as read, and the rules that allow it decide without more.
func (in *intake) shape(obj object) map[string]any {
	if obj.body != nil {
		return obj.Object
	}
	return in.src.rules.Shape(obj.Object)
}

// withID gives a mirror or index record the message id of its change's event (published or
// not), suffixed by kind, so that a copy delivered late after a reconnect is dropped by the
// bucket's duplicate window instead of overwriting a newer value.
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

// prime fills the cache of shaped objects with the state at resourceVersion rv, read with an
// exact list, so that the first change after a resume is compared with the state the relay
// had seen rather than with nothing. It returns an expired error when rv has left etcd's
// history; the caller relists then.
func (in *intake) prime(ctx context.Context, rv string) error {
	cache := make(shapedCache)
	_, err := in.src.listPages(ctx, rv, func(obj object) error {
		if in.selected(obj.GetNamespace()) {
			cache[objectKey(obj.Unstructured)] = in.shape(obj)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list %s at the checkpoint: %w", in.src.describe(), err)
	}
	in.cache = cache
	in.log.Info().Int("objects", len(cache)).Str("rv", rv).Msg("previous states loaded for filters")
	return nil
}

// catchUp publishes the objects of namespaces that have just become selected: each object
// not yet published comes out as added (modified when an older state was published before
// the namespace left the selection), from a consistent list of the namespace. Later watch
// events older than the list are then replays the index drops. It runs with no watch open.
//
// A namespace is caught up when it is selected now and either was not selected before its
// labels changed, or the intake dropped a change of it meanwhile (labels flapping, or the
// object's watch running ahead of the namespace watch).
func (in *intake) catchUp(ctx context.Context) error {
	for ns, before := range in.nsChanges() {
		if ns == "" || !in.selected(ns) || (in.src.nsRules.Namespace(ns, before) && !in.dropped[ns]) {
			continue
		}
		if in.src.cfg.Namespace != "" && ns != in.src.cfg.Namespace {
			continue // another source's namespace: this one watches only its own
		}
		start := time.Now()
		changes := 0
		_, err := listPages(ctx, in.src.nsClient(ns), in.src.cfg.LabelSelector, in.src.cfg.FieldSelector, "", func(obj object) error {
			key := objectKey(obj.Unstructured)
			uid := string(obj.GetUID())
			prev, indexed := in.index.get(key)
			if indexed && prev.covers(uid, obj.GetResourceVersion()) {
				return nil
			}
			t := event.Added
			if indexed && prev.UID != uid {
				// Deleted and re-created while the namespace was not selected.
				if err := in.emitInferredDelete(ctx, key, prev); err != nil {
					return err
				}
				indexed = false
			}
			if indexed {
				t = event.Modified
			}
			changes++
			return in.offer(ctx, obj, t, event.Relist, "", indexed)
		})
		if err != nil {
			// The changes are taken: a relist is the catch-up that cannot be lost.
			return fmt.Errorf("%w: list newly selected namespace %s: %w", errNeedRelist, ns, err)
		}
		delete(in.dropped, ns)
		in.log.Info().Str("selected_namespace", ns).Int("changes", changes).
			Stringer("took", time.Since(start).Round(time.Millisecond)).Msg("namespace selected: caught up on its objects")
	}
	return nil
}

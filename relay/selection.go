package relay

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// eventMarks are the headers that qualify an event beyond its type and origin.
type eventMarks struct {
	// finalStateUnknown: a delete inferred by a relist, whose body is the last identity.
	finalStateUnknown bool
	// leftSelection: a delete that is the object leaving the source's server-side label or
	// field selector, not the object's deletion.
	leftSelection bool
}

// hasServerSelector reports whether the apiserver filters the source's objects by labels or
// fields: only then can a watch report an object that still exists as DELETED.
func (s *Source) hasServerSelector() bool {
	return s.cfg.LabelSelector != "" || s.cfg.FieldSelector != ""
}

// leftSelection tells a DELETED that a watch with a server-side selector reports for an
// object that stopped matching (the watch's own semantics: the event carries the last
// matching state and the resourceVersion of the change) from a real deletion. It reads the
// object by name, without the source's selectors, with a consistent read, so at a
// resourceVersion no older than the event's: the same uid still there means the object left
// the selection; nothing, or another uid (deleted and re-created), means it was deleted.
//
// The read is one list request of at most one object (a field selector on metadata.name, which every
// resource supports, and which the relay's list permission covers), made only by sources with
// a server-side selector. Races resolve to what is true at the read: an object deleted just
// after leaving the selection counts as deleted; one that left and came back still counts as
// having left, and its return arrives as added.
func (in *intake) leftSelection(ctx context.Context, obj object) (bool, error) {
	if !in.src.hasServerSelector() {
		return false, nil
	}
	// One request without paging: a name selects at most one object, so the read takes no
	// list page's share of the memory budget, which would make the delete wait for that share
	// (with a small budget, until nothing at all is held).
	byName := fields.OneTermEqualSelector("metadata.name", obj.GetName()).String()
	p, err := in.src.nsClient(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: byName})
	if err != nil {
		return false, fmt.Errorf("read %s %s after its delete, to tell a deletion from leaving the selection: %w",
			in.src.describe(), objectKey(obj.Unstructured), err)
	}
	uid := obj.GetUID()
	for _, o := range p.Items {
		if o.GetUID() == uid {
			return true, nil
		}
	}
	return false, nil
}

// emitInferredDelete queues the inferred delete of an object that vanished while nobody
// watched (see emitInferredDeleteMarked).
func (in *intake) emitInferredDelete(ctx context.Context, key string, prev entry) error {
	return in.emitInferredDeleteMarked(ctx, key, prev, eventMarks{finalStateUnknown: true})
}

// emitVanished queues the inferred delete of an indexed object a relist did not find. With a
// server-side selector the object may still exist, out of the selection: the delete then
// carries that mark too.
func (in *intake) emitVanished(ctx context.Context, key string, prev entry) error {
	left, err := in.leftSelection(ctx, object{Unstructured: in.src.tombstone(key, prev)})
	if err != nil {
		return err
	}
	return in.emitInferredDeleteMarked(ctx, key, prev, eventMarks{finalStateUnknown: true, leftSelection: left})
}

package relay

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// entry is what the relay remembers of one object: enough to recognise a replay and to name
// the object in an inferred delete, never the object itself. The index stores it without
// Held, which it keeps apart (see index).
type entry struct {
	UID             string
	ResourceVersion string
	// Held names, joined by heldSeparator, the derived events' state conditions that held at
	// the recorded change; "" when none (or the rules derive nothing).
	Held string
}

// index maps an object's namespace/name to the last change the relay took for publishing. It
// is owned by one source; the mutex only guards reads from metrics and tests. The held state
// conditions live in a map of their own, holding only the objects for which some condition
// holds, so that an index without derived rules pays nothing for them.
type index struct {
	mu      sync.Mutex
	entries map[string]indexed
	held    map[string]string
}

// indexed is what the index keeps per object besides its held conditions.
type indexed struct {
	UID             string
	ResourceVersion string
}

func newIndex() *index {
	return &index{entries: make(map[string]indexed), held: make(map[string]string)}
}

func (ix *index) get(key string) (entry, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e, ok := ix.entries[key]
	if !ok {
		return entry{}, false
	}
	return entry{UID: e.UID, ResourceVersion: e.ResourceVersion, Held: ix.held[key]}, true
}

// put records e for key, its held conditions with it (none when e.Held is empty).
func (ix *index) put(key string, e entry) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.entries[key] = indexed{UID: e.UID, ResourceVersion: e.ResourceVersion}
	if e.Held != "" {
		ix.held[key] = e.Held
	} else if len(ix.held) > 0 {
		delete(ix.held, key)
	}
}

func (ix *index) remove(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.entries, key)
	delete(ix.held, key)
}

func (ix *index) len() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.entries)
}

// snapshot copies the entries, for the relist diff.
func (ix *index) snapshot() map[string]entry {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make(map[string]entry, len(ix.entries))
	for k, v := range ix.entries {
		out[k] = entry{UID: v.UID, ResourceVersion: v.ResourceVersion, Held: ix.held[k]}
	}
	return out
}

// covers reports whether a change of the object uid at rv is already covered by the recorded
// one: the same object (uid) at the same or an older resourceVersion. Another uid is another
// object whatever its resourceVersion: an object re-created under the name after an etcd
// restore may carry a lower resourceVersion than the stale entry (a replay of an older
// object's change is then published again under its own id, which JetStream's duplicate
// window drops). resourceVersions that are not integers are only compared for equality.
func (e entry) covers(uid, rv string) bool {
	return e.UID == uid && (e.ResourceVersion == rv || rvLess(rv, e.ResourceVersion))
}

// newest returns the highest integer resourceVersion in the index, "" when there is none.
func (ix *index) newest() string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var max string
	for _, e := range ix.entries {
		if !wellFormedRV(e.ResourceVersion) {
			continue
		}
		if max == "" || rvLess(max, e.ResourceVersion) {
			max = e.ResourceVersion
		}
	}
	return max
}

// rvLess reports a < b for resourceVersions of the same resource type, false when either is
// not an integer (the apiserver promises integers since Kubernetes 1.35; older or
// non-etcd-backed servers might not). It compares with apimachinery's own helper, never by
// parsing.
func rvLess(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}

// wellFormedRV reports whether rv is an integer resourceVersion that rvLess can order.
func wellFormedRV(rv string) bool {
	_, err := resourceversion.CompareResourceVersion(rv, rv)
	return err == nil
}

// ObjectIndex is the durable record, per source, of the last change published for each
// object (namespace/name): it keeps replays out after restarts and is what a relist is diffed
// against.
type ObjectIndex interface {
	// Load calls fn for every object recorded under source (held names the derived events'
	// state conditions that held at the recorded change, nil when none) and returns the
	// journal that makes the source's records durable from then on.
	Load(ctx context.Context, source string, fn func(object, uid, rv string, held []string)) (IndexJournal, error)
	// Record returns the record of object's change (uid at rv, with the state conditions
	// held), or of its removal when uid is empty; the pipeline hands it to the journal after
	// the event's and the derived events' acks.
	Record(source, object, uid, rv string, held []string) *nats.Msg
}

// IndexJournal makes a source's index records durable, many objects' records together.
type IndexJournal interface {
	// Write makes rec durable and calls done once: nil when it is, the error otherwise (the
	// pipeline then writes it again, like a failed publish). done may run on another
	// goroutine, or before Write returns.
	Write(rec *nats.Msg, done func(error))
	// Run does the journal's upkeep (compaction) until ctx ends.
	Run(ctx context.Context) error
}

func objectKey(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// metaKey is objectKey for an event's identity.
func metaKey(m event.Meta) string {
	if m.Namespace != "" {
		return m.Namespace + "/" + m.Name
	}
	return m.Name
}

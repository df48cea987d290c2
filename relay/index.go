package relay

import (
	"strconv"
	"sync"
)

// entry is what the relay remembers of one object: enough to recognise a replay and to name
// the object in an inferred delete, never the object itself.
type entry struct {
	UID             string
	ResourceVersion string
}

// index maps an object's namespace/name to the last change the relay took for publishing. It
// is owned by one source; the mutex only guards reads from metrics and tests.
type index struct {
	mu      sync.Mutex
	entries map[string]entry
}

func newIndex() *index { return &index{entries: make(map[string]entry)} }

func (ix *index) get(key string) (entry, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	e, ok := ix.entries[key]
	return e, ok
}

func (ix *index) put(key string, e entry) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.entries[key] = e
}

func (ix *index) remove(key string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.entries, key)
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
		out[k] = v
	}
	return out
}

// covers reports whether a change at rv is already covered by the recorded one: the same
// or an older resourceVersion. resourceVersions of one resource are totally ordered, so this
// holds whatever the uid; an unparsable one is only compared for equality.
func (e entry) covers(rv string) bool {
	return e.ResourceVersion == rv || rvLess(rv, e.ResourceVersion)
}

// rvLess reports a < b for resourceVersions of the same resource type, false when either is
// not an integer (the apiserver promises integers since Kubernetes 1.35; older or
// non-etcd-backed servers might not).
func rvLess(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

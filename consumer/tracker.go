package consumer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// DefaultTombstoneTTL is how long a Tracker remembers a deleted object: far longer than a
// message stays in flight (AckWait times a few deliveries) and than the relay's default
// duplicate window (10m), so a late copy of an earlier change of a deleted object is still
// recognised, while the tombstones of a busy resource do not pile up for ever.
const DefaultTombstoneTTL = time.Hour

// ObjectKey names one object's history: resourceVersions compare only within one resource of
// one cluster, and a uid names one object for its whole life (a delete and re-create under
// the same name gets a new uid). A derived event shares its change's resourceVersion, so
// each derived event name of an object has a history of its own (Derived), apart from the
// object's changes.
type ObjectKey struct {
	Cluster  string
	Group    string
	Resource string
	UID      string
	// Derived is the derived event's name for a derived event's history; "" for the
	// object's own changes.
	Derived string
}

// KeyOf returns the ObjectKey of the object an event is about (and of its derived event's
// name, for a derived event).
func KeyOf(e Event) ObjectKey {
	return ObjectKey{Cluster: e.Cluster, Group: e.Group, Resource: e.Resource, UID: e.UID, Derived: e.Derived}
}

// String returns the key as one JetStream key-value key (tokens of letters, digits and
// "-_=", joined by dots; see event.KeyToken), so that a Store can write it to a KV bucket or
// a file as it is: <cluster>.<group>.<resource>.<uid>, the core group written "=", followed
// for a derived event by a fifth token, its name.
func (k ObjectKey) String() string {
	toks := []string{event.KeyToken(k.Cluster), event.KeyToken(k.Group),
		event.KeyToken(k.Resource), event.KeyToken(k.UID)}
	if k.Derived != "" {
		toks = append(toks, event.KeyToken(k.Derived))
	}
	return strings.Join(toks, ".")
}

// TrackedState is what a Tracker keeps of one object: the resourceVersion of the last change
// applied and whether that change was a delete (a tombstone).
type TrackedState struct {
	// ResourceVersion is the resourceVersion of the last change applied.
	ResourceVersion string `json:"resourceVersion"`
	// Deleted marks a tombstone: the last change applied was a delete.
	Deleted bool `json:"deleted,omitempty"`
	// DeletedAt is when the Tracker recorded the delete; a tombstone older than the
	// Tracker's TombstoneTTL counts as absent and a Store may drop it.
	DeletedAt time.Time `json:"deletedAt,omitzero"`
}

// TrackerStore keeps a Tracker's states. It is the one place a Tracker's memory lives, so a
// store backed by a KV bucket or a file survives the service's restart; MemoryStore keeps
// them in the process. A Tracker calls a store from one goroutine at a time.
type TrackerStore interface {
	// Get returns the state stored for key, and false when there is none.
	Get(ctx context.Context, key ObjectKey) (TrackedState, bool, error)
	// Put stores the state of key.
	Put(ctx context.Context, key ObjectKey, s TrackedState) error
}

// Decision is what a Tracker says of an event.
type Decision int

const (
	// Apply: the event is newer than what was applied for its object, or the first one seen.
	Apply Decision = iota
	// Stale: the event is not newer than the change last applied: a redelivery, a replay by
	// the relay, or a change superseded by one applied already.
	Stale
	// AfterDelete: the object was deleted at this event's resourceVersion or later; the event
	// is a late copy of an earlier change and must not bring the object back.
	AfterDelete
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case Apply:
		return "apply"
	case Stale:
		return "stale"
	case AfterDelete:
		return "after-delete"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Tracker applies the rule of docs/events.md to a stream of events: per object (uid, in one
// cluster and resource), apply a change only when its resourceVersion is newer than the one
// last applied, so that redeliveries, replays and late copies are ignored, and apply a delete
// whose resourceVersion equals the last one (an inferred delete, k8s-final-state-unknown,
// repeats the resourceVersion of the object's last event). A deleted object leaves a
// tombstone for TombstoneTTL, so a late copy of one of its earlier changes does not bring it
// back; an object that comes back with a newer resourceVersion (it matched the relay's
// selector again) is applied.
//
// It keeps one small state per object (resourceVersion, tombstone), not the object. Its
// methods are safe for concurrent use, and Record never replaces a newer state with an older
// one. Check and Record are still two steps: two workers handling one object's events at once
// may both be told Apply, and both do the work, so handle one object's events one at a time
// (as Consume calls a Handler, or a partitioned consumer). Observe does both steps at once. A
// store shared by several processes needs its own guard against two of them recording one
// object at once.
type Tracker struct {
	store TrackerStore
	ttl   time.Duration
	now   func() time.Time
	mu    sync.Mutex
}

// NewTracker returns a Tracker that keeps its states in store; nil means a new MemoryStore.
// A ttl of 0 means DefaultTombstoneTTL.
func NewTracker(store TrackerStore, ttl time.Duration) *Tracker {
	if store == nil {
		store = NewMemoryStore()
	}
	if ttl <= 0 {
		ttl = DefaultTombstoneTTL
	}
	return &Tracker{store: store, ttl: ttl, now: time.Now}
}

// Check decides whether e should be applied, without recording anything: call Record once
// the work is done. An event whose resourceVersion is not an integer fails with
// ErrInvalidResourceVersion.
func (t *Tracker) Check(ctx context.Context, e Event) (Decision, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.check(ctx, e)
}

// check is Check with t.mu held.
func (t *Tracker) check(ctx context.Context, e Event) (Decision, error) {
	if _, err := ParseResourceVersion(e.ResourceVersion); err != nil {
		return Stale, fmt.Errorf("track %s: %w", e.ID(), err)
	}
	key := KeyOf(e)
	s, ok, err := t.store.Get(ctx, key)
	if err != nil {
		return Stale, fmt.Errorf("track %s: read state of %s: %w", e.ID(), key, err)
	}
	if !ok || (s.Deleted && t.now().Sub(s.DeletedAt) > t.ttl) {
		return Apply, nil
	}
	c, err := CompareResourceVersions(e.ResourceVersion, s.ResourceVersion)
	if err != nil {
		// e's resourceVersion is valid (checked above): the stored state is not. That is the
		// store's fault, not the event's, so the error does not wrap ErrInvalidResourceVersion,
		// and a Handler naks the event instead of terminating it.
		return Stale, fmt.Errorf("track %s: stored state of %s is unusable: %v", e.ID(), key, err)
	}
	switch {
	case c > 0:
		return Apply, nil
	case c == 0 && e.Type == event.Deleted && !s.Deleted:
		return Apply, nil // an inferred delete repeats the last resourceVersion
	case s.Deleted:
		return AfterDelete, nil
	}
	return Stale, nil
}

// Record stores e as the last change applied to its object. Call it after the work for e is
// done (after Check said Apply). It never moves an object's state backwards: when Check
// would now say Stale or AfterDelete (a newer change, or the object's delete, was recorded
// since), Record keeps the stored state, writes nothing and returns nil, so a late Record of
// an older change cannot let a stale copy be applied later. It fails as Check does (a
// resourceVersion that is not an integer, an unusable stored state, a store error) instead
// of writing. That costs one more read of the store than a blind write, under the tracker's
// mutex; Observe reads once.
func (t *Tracker) Record(ctx context.Context, e Event) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.check(ctx, e)
	if err != nil || d != Apply {
		return err
	}
	return t.record(ctx, e)
}

// record is Record with t.mu held.
func (t *Tracker) record(ctx context.Context, e Event) error {
	s := TrackedState{ResourceVersion: e.ResourceVersion}
	if e.Type == event.Deleted {
		s.Deleted, s.DeletedAt = true, t.now()
	}
	if err := t.store.Put(ctx, KeyOf(e), s); err != nil {
		return fmt.Errorf("track %s: write state of %s: %w", e.ID(), KeyOf(e), err)
	}
	if p, ok := t.store.(interface{ Prune(before time.Time) }); ok && s.Deleted {
		p.Prune(s.DeletedAt.Add(-t.ttl))
	}
	return nil
}

// Observe is Check and, when the decision is Apply, Record in one step: for a service whose
// work is to keep the tracked state itself, or that records the work elsewhere first.
func (t *Tracker) Observe(ctx context.Context, e Event) (Decision, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := t.check(ctx, e)
	if err != nil || d != Apply {
		return d, err
	}
	return d, t.record(ctx, e)
}

// MemoryStore is a TrackerStore in the process's memory: the states are lost when it ends,
// so rebuild them at start from where the service records its work (Tracker.Record of each
// change the work log holds), or use a store that persists. It drops tombstones older than
// the Tracker's TombstoneTTL as new deletes come.
type MemoryStore struct {
	mu     sync.Mutex
	states map[ObjectKey]TrackedState
	// tombs lists the keys of tombstones in the order they were written, so the oldest
	// are dropped first without a scan of every state.
	tombs []ObjectKey
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{states: make(map[ObjectKey]TrackedState)}
}

// Get returns the state of key.
func (m *MemoryStore) Get(_ context.Context, key ObjectKey) (TrackedState, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.states[key]
	return s, ok, nil
}

// Put stores the state of key.
func (m *MemoryStore) Put(_ context.Context, key ObjectKey, s TrackedState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[key] = s
	if s.Deleted {
		m.tombs = append(m.tombs, key)
	}
	return nil
}

// Len returns the number of objects whose state the store holds, tombstones included.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.states)
}

// Prune drops the tombstones written before the given time.
func (m *MemoryStore) Prune(before time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, k := range m.tombs {
		s, ok := m.states[k]
		if !ok || !s.Deleted {
			n++ // revived or gone: nothing to drop
			continue
		}
		if !s.DeletedAt.Before(before) {
			break
		}
		delete(m.states, k)
		n++
	}
	m.tombs = m.tombs[n:]
}

// Compile-time check that MemoryStore is a TrackerStore.
var _ TrackerStore = (*MemoryStore)(nil)

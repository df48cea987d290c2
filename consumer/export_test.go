package consumer

import (
	"maps"
	"time"
)

// SetTrackerClock makes t read the time from now, so tests move it instead of waiting.
func SetTrackerClock(t *Tracker, now func() time.Time) { t.now = now }

// TrackedStates returns a copy of the states of a Tracker that keeps them in a MemoryStore,
// so tests compare what it recorded.
func TrackedStates(t *Tracker) map[ObjectKey]TrackedState {
	m := t.store.(*MemoryStore)
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.states)
}

// MemberPriority is the priority a member pulls a partition's events at.
var MemberPriority = memberPriority

// ServerAtLeast reports whether a server version is at least major.minor.
func ServerAtLeast(v string, major, minor int) bool { return serverAtLeast(v, [2]int{major, minor}) }

package contract

import (
	"fmt"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Ordinary returns the messages that are not derived events, in order: the ones the checks
// of ordinary events (PerUIDOrder, NothingMissing, FinalState...) apply to.
func Ordinary(msgs []Message) []Message {
	var out []Message
	for _, m := range msgs {
		if m.Meta.Derived == "" {
			out = append(out, m)
		}
	}
	return out
}

// DerivedOf returns the derived events named name of the object key (namespace/name), in
// stream order.
func DerivedOf(msgs []Message, key, name string) []Message {
	var out []Message
	for _, m := range msgs {
		if m.Meta.Derived == name && m.Key() == key {
			out = append(out, m)
		}
	}
	return out
}

// Derived checks the derived events of a stream: each names its change in
// k8s-derived-from, comes after that change's own event when the stream holds it (and
// before any later change of the object), and no change derives the same name twice (the
// ids differ per change and name, so NoDuplicateIDs alone would not see a change's event
// derived again under a later change).
func Derived(msgs []Message) []string {
	var out []string
	at := make(map[string]int) // change id -> position of its own event (its first copy)
	for i, m := range msgs {
		if _, dup := at[m.Meta.ID()]; m.Meta.Derived == "" && !dup {
			at[m.Meta.ID()] = i
		}
	}
	last := make(map[string]Message) // uid -> last ordinary event so far
	derivedOnce := make(map[[2]string]Message)
	for i, m := range msgs {
		if m.Meta.Derived == "" {
			last[m.Meta.UID] = m
			continue
		}
		if j, ok := at[m.Meta.ChangeID()]; ok && j > i {
			out = append(out, fmt.Sprintf("%s: before its change's own event (%s)", describeDerived(m), msgs[j].String()))
		}
		from := m.Header.Get(event.HeaderDerivedFrom)
		if from != m.Meta.ChangeID() {
			out = append(out, fmt.Sprintf("%s: %s %q, want the change's id %q", describeDerived(m), event.HeaderDerivedFrom, from, m.Meta.ChangeID()))
		}
		k := [2]string{from, m.Meta.Derived}
		if f, ok := derivedOnce[k]; ok {
			out = append(out, fmt.Sprintf("%s: derived twice from one change (first %s)", describeDerived(m), describeDerived(f)))
		}
		derivedOnce[k] = m
		if l, ok := last[m.Meta.UID]; ok {
			lrv, _ := ParseRV(l.Meta.ResourceVersion)
			rv, _ := ParseRV(m.Meta.ResourceVersion)
			if lrv > rv {
				out = append(out, fmt.Sprintf("%s: after a later change of the object (%s)", describeDerived(m), l.String()))
			}
		}
	}
	return out
}

// describeDerived describes a derived event in one line.
func describeDerived(m Message) string {
	return fmt.Sprintf("seq %d: derived %s of %s %s rv=%s origin=%s", m.Seq, m.Meta.Derived, m.Meta.Type, m.Key(), m.Meta.ResourceVersion, m.Meta.Origin)
}

// ExpectDerived checks the derived events named name against the ordinary events of the same
// stream, which must hold every change of the objects (no 410, no filter): cond says whether
// the condition holds for a change, given its body and the previous change's body of the same
// uid (nil for the first). For a state condition (state true) one event is expected for every
// change for which cond holds while it did not hold for the previous change; for a
// transition condition, one for every change for which it holds. Missing and unexpected
// events are both problems, named by the change they derive from.
func ExpectDerived(msgs []Message, name string, state bool, cond func(obj, old map[string]any) bool) []string {
	want := make(map[string]Message) // change id -> its own event
	prevBody := make(map[string]map[string]any)
	prevHeld := make(map[string]bool)
	seen := make(map[string]bool)
	for _, m := range msgs {
		if m.Meta.Derived != "" || seen[m.Meta.ID()] {
			continue // a copy of a change (past the duplicate window) is not another change
		}
		seen[m.Meta.ID()] = true
		old, seen := prevBody[m.Meta.UID]
		if !seen {
			old = nil
		}
		now := cond(m.Body, old)
		if now && (!state || !prevHeld[m.Meta.UID]) {
			want[m.Meta.ID()] = m
		}
		prevBody[m.Meta.UID], prevHeld[m.Meta.UID] = m.Body, now
	}
	var out []string
	got := make(map[string]bool)
	for _, m := range msgs {
		if m.Meta.Derived != name {
			continue
		}
		from := m.Header.Get(event.HeaderDerivedFrom)
		got[from] = true
		if _, ok := want[from]; !ok {
			out = append(out, "unexpected: "+describeDerived(m))
		}
	}
	for id, m := range want {
		if !got[id] {
			out = append(out, fmt.Sprintf("missing: derived %s of %s", name, m.String()))
		}
	}
	return out
}

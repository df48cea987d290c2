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
	at := make(map[string]int) // change id -> position of its own event
	for i, m := range msgs {
		if m.Meta.Derived == "" {
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

package contract

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Change is one change of an object as a ground-truth watcher saw it.
type Change struct {
	Type event.Type
	// Key is namespace/name.
	Key string
	UID string
	RV  string
}

// String describes the change in one line.
func (c Change) String() string {
	return fmt.Sprintf("%s %s uid=%s rv=%s", c.Type, c.Key, c.UID, c.RV)
}

// Object is one object as the cluster holds it.
type Object struct{ UID, RV string }

// Envelope checks that every message's subject and Nats-Msg-Id agree with its headers; the body is
// there unless k8s-body-omitted says why not, and a body's metadata names the same object and
// resourceVersion as the headers.
func Envelope(msgs []Message, prefix string) []string {
	var out []string
	for _, m := range msgs {
		if want := m.Meta.Subject(prefix).String(); m.Subject != want {
			out = append(out, fmt.Sprintf("%s: subject %q, want %q", m.String(), m.Subject, want))
		}
		if got, want := m.Header.Get(event.HeaderMsgID), m.Meta.ID(); got != want {
			out = append(out, fmt.Sprintf("%s: Nats-Msg-Id %q, want %q", m.String(), got, want))
		}
		omitted := m.Header.Get(event.HeaderBodyOmitted)
		switch {
		case omitted != "" && m.Body != nil:
			out = append(out, fmt.Sprintf("%s: has a body although %s says it was left out", m.String(), event.HeaderBodyOmitted))
			continue
		case omitted == "" && m.Body == nil:
			out = append(out, fmt.Sprintf("%s: no body and no %s header", m.String(), event.HeaderBodyOmitted))
			continue
		case m.Body == nil:
			continue
		}
		md, _ := m.Body["metadata"].(map[string]any)
		for field, want := range map[string]string{"name": m.Meta.Name, "uid": m.Meta.UID, "resourceVersion": m.Meta.ResourceVersion} {
			if got, _ := md[field].(string); got != want {
				out = append(out, fmt.Sprintf("%s: body metadata.%s %q, want %q (headers)", m.String(), field, got, want))
			}
		}
	}
	return out
}

// NoDuplicateIDs (check 1): no event id appears twice in the stream.
func NoDuplicateIDs(msgs []Message) []string {
	var out []string
	first := make(map[string]Message, len(msgs))
	for _, m := range msgs {
		id := m.Meta.ID()
		if f, ok := first[id]; ok {
			out = append(out, fmt.Sprintf("id %s twice: %s and %s", id, f.String(), m.String()))
			continue
		}
		first[id] = m
	}
	return out
}

// PerUIDOrder (check 2): per object uid, resourceVersions strictly increase in stream
// order, and nothing follows a delete. An inferred delete carries the last identity the relay
// published, so it may repeat the resourceVersion of the event before it.
func PerUIDOrder(msgs []Message) []string {
	var out []string
	last := make(map[string]Message)
	for _, m := range msgs {
		rv, ok := ParseRV(m.Meta.ResourceVersion)
		if !ok {
			out = append(out, fmt.Sprintf("%s: resourceVersion is not an integer", m.String()))
			continue
		}
		prev, seen := last[m.Meta.UID]
		last[m.Meta.UID] = m
		if !seen {
			continue
		}
		if prev.Meta.Type == event.Deleted {
			out = append(out, fmt.Sprintf("%s after the delete of the same uid (%s)", m.String(), prev.String()))
			continue
		}
		prevRV, _ := ParseRV(prev.Meta.ResourceVersion)
		if rv > prevRV || rv == prevRV && m.InferredDelete() {
			continue
		}
		out = append(out, fmt.Sprintf("%s not after %s", m.String(), prev.String()))
	}
	return out
}

// NothingMissing (check 3, strict): every change ground truth saw is in the stream as
// (type, uid, resourceVersion), and the stream holds nothing ground truth did not see. Only
// valid when neither the relay nor the ground-truth watcher lost history (no 410).
func NothingMissing(msgs []Message, truth []Change) []string {
	var out []string
	type change struct {
		t       event.Type
		uid, rv string
	}
	inStream := make(map[change]bool, len(msgs))
	for _, m := range msgs {
		inStream[change{m.Meta.Type, m.Meta.UID, m.Meta.ResourceVersion}] = true
	}
	inTruth := make(map[change]bool, len(truth))
	for _, c := range truth {
		k := change{c.Type, c.UID, c.RV}
		inTruth[k] = true
		if !inStream[k] {
			out = append(out, "missing: "+c.String())
		}
	}
	for _, m := range msgs {
		if !inTruth[change{m.Meta.Type, m.Meta.UID, m.Meta.ResourceVersion}] {
			out = append(out, "not a change ground truth saw: "+m.String())
		}
	}
	return out
}

// FinalState (check 4): for every name the last event is a delete exactly when the object
// is gone, and otherwise carries the object's current uid and resourceVersion; every other uid
// the stream mentions ends with a delete, so that a consumer's view holds no ghost.
func FinalState(msgs []Message, final map[string]Object) []string {
	var out []string
	lastByKey := make(map[string]Message)
	lastByUID := make(map[string]Message)
	for _, m := range msgs {
		lastByKey[m.Key()] = m
		lastByUID[m.Meta.UID] = m
	}
	for _, key := range slices.Sorted(maps.Keys(final)) {
		want := final[key]
		m, ok := lastByKey[key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s (uid=%s rv=%s) exists but was never published", key, want.UID, want.RV))
		case m.Meta.Type == event.Deleted:
			out = append(out, fmt.Sprintf("%s exists (uid=%s rv=%s) but the last event is %s", key, want.UID, want.RV, m.String()))
		case m.Meta.UID != want.UID || m.Meta.ResourceVersion != want.RV:
			out = append(out, fmt.Sprintf("%s is uid=%s rv=%s but the last event is %s", key, want.UID, want.RV, m.String()))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(lastByKey)) {
		if _, ok := final[key]; !ok && lastByKey[key].Meta.Type != event.Deleted {
			out = append(out, fmt.Sprintf("%s is gone but the last event is %s", key, lastByKey[key].String()))
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(lastByUID)) {
		m := lastByUID[uid]
		if m.Meta.Type == event.Deleted || final[m.Key()].UID == uid {
			continue
		}
		out = append(out, fmt.Sprintf("uid %s of %s is gone but its last event is %s", uid, m.Key(), m.String()))
	}
	return out
}

// InferredDeletes (check 5): a delete inferred by a relist carries
// k8s-final-state-unknown: true, and no other event does.
func InferredDeletes(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		got := m.Header.Get(event.HeaderFinalStateUnknown)
		switch {
		case m.InferredDelete() && got != "true":
			out = append(out, fmt.Sprintf("%s: inferred delete without %s: true", m.String(), event.HeaderFinalStateUnknown))
		case !m.InferredDelete() && got != "":
			out = append(out, fmt.Sprintf("%s: %s %q on an event that is not an inferred delete", m.String(), event.HeaderFinalStateUnknown, got))
		}
	}
	return out
}

// KnownUIDs: every uid in the stream is one the load generator created (nothing phantom).
func KnownUIDs(msgs []Message, uids map[string]bool) []string {
	var out []string
	reported := make(map[string]bool)
	for _, m := range msgs {
		if !uids[m.Meta.UID] && !reported[m.Meta.UID] {
			reported[m.Meta.UID] = true
			out = append(out, "uid the generator never created: "+m.String())
		}
	}
	return out
}

// RelistDiff compares what the relay published after a relist with the difference between
// before (what it had published) and after (the cluster now): a delete for each vanished
// object (origin relist, final-state-unknown, the last published uid and resourceVersion), a
// delete and an add for a recreated one, a modified for a changed one, an add for a new one,
// and nothing at all for the unchanged.
func RelistDiff(msgs []Message, before, after map[string]Object) []string {
	type want struct {
		t       event.Type
		uid, rv string
	}
	got := ByObject(msgs)
	keys := make(map[string]bool)
	for _, m := range []map[string]Object{before, after} {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range got {
		keys[k] = true
	}
	var out []string
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		b, hadB := before[key]
		a, hasA := after[key]
		var ws []want
		what := "unchanged"
		switch {
		case !hadB && !hasA:
			what = "created and deleted while stopped"
		case !hadB:
			what, ws = "new", []want{{event.Added, a.UID, a.RV}}
		case !hasA:
			what, ws = "deleted", []want{{event.Deleted, b.UID, b.RV}}
		case a.UID != b.UID:
			what, ws = "recreated", []want{{event.Deleted, b.UID, b.RV}, {event.Added, a.UID, a.RV}}
		case a.RV != b.RV:
			what, ws = "updated", []want{{event.Modified, a.UID, a.RV}}
		}
		var have []string
		for _, m := range got[key] {
			have = append(have, m.String())
		}
		problem := len(got[key]) != len(ws)
		for i := 0; !problem && i < len(ws); i++ {
			m := got[key][i]
			problem = m.Meta.Type != ws[i].t || m.Meta.UID != ws[i].uid || m.Meta.ResourceVersion != ws[i].rv ||
				m.Meta.Origin != event.Relist ||
				(m.Meta.Type == event.Deleted) != (m.Header.Get(event.HeaderFinalStateUnknown) == "true")
		}
		if problem {
			out = append(out, fmt.Sprintf("%s (%s): want %v (origin relist, deletes final-state-unknown), got [%s]",
				key, what, ws, strings.Join(have, "; ")))
		}
	}
	return out
}

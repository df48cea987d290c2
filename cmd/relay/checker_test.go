package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// The checker compares what a consumer read from the stream with ground truth. Every check is
// a pure function from messages (and truth) to a list of problems, so that a unit test can
// show that each one fails when it should (TestFaultChecker).

// truthChange is one change of an object as the ground-truth watcher saw it.
type truthChange struct {
	Type event.Type
	// Key is namespace/name.
	Key string
	UID string
	RV  string
}

func (c truthChange) String() string {
	return fmt.Sprintf("%s %s uid=%s rv=%s", c.Type, c.Key, c.UID, c.RV)
}

// objectState is one object as the cluster holds it.
type objectState struct{ UID, RV string }

func msgKey(m received) string {
	if m.meta.Namespace == "" {
		return m.meta.Name
	}
	return m.meta.Namespace + "/" + m.meta.Name
}

func msgString(m received) string {
	s := fmt.Sprintf("seq %d: %s %s uid=%s rv=%s origin=%s", m.seq, m.meta.Type, msgKey(m), m.meta.UID, m.meta.ResourceVersion, m.meta.Origin)
	if m.header.Get(event.HeaderFinalStateUnknown) != "" {
		s += " final-state-unknown"
	}
	if o := m.header.Get(event.HeaderBodyOmitted); o != "" {
		s += " body-omitted=" + o
	}
	return s
}

// inferredDelete reports whether m is a delete the relay inferred from a relist.
func inferredDelete(m received) bool {
	return m.meta.Type == event.Deleted && m.meta.Origin == event.Relist
}

func parseRV(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// checkEnvelope: every message's subject and Nats-Msg-Id agree with its headers; the body is
// there unless k8s-body-omitted says why not, and a body's metadata names the same object and
// resourceVersion as the headers.
func checkEnvelope(msgs []received, prefix string) []string {
	var out []string
	for _, m := range msgs {
		if want := m.meta.Subject(prefix).String(); m.subject != want {
			out = append(out, fmt.Sprintf("%s: subject %q, want %q", msgString(m), m.subject, want))
		}
		if got, want := m.header.Get(event.HeaderMsgID), m.meta.ID(); got != want {
			out = append(out, fmt.Sprintf("%s: Nats-Msg-Id %q, want %q", msgString(m), got, want))
		}
		omitted := m.header.Get(event.HeaderBodyOmitted)
		switch {
		case omitted != "" && m.body != nil:
			out = append(out, fmt.Sprintf("%s: has a body although %s says it was left out", msgString(m), event.HeaderBodyOmitted))
			continue
		case omitted == "" && m.body == nil:
			out = append(out, fmt.Sprintf("%s: no body and no %s header", msgString(m), event.HeaderBodyOmitted))
			continue
		case m.body == nil:
			continue
		}
		md, _ := m.body["metadata"].(map[string]any)
		for field, want := range map[string]string{"name": m.meta.Name, "uid": m.meta.UID, "resourceVersion": m.meta.ResourceVersion} {
			if got, _ := md[field].(string); got != want {
				out = append(out, fmt.Sprintf("%s: body metadata.%s %q, want %q (headers)", msgString(m), field, got, want))
			}
		}
	}
	return out
}

// checkNoDuplicateIDs (check 1): no event id appears twice in the stream.
func checkNoDuplicateIDs(msgs []received) []string {
	var out []string
	first := make(map[string]received, len(msgs))
	for _, m := range msgs {
		id := m.meta.ID()
		if f, ok := first[id]; ok {
			out = append(out, fmt.Sprintf("id %s twice: %s and %s", id, msgString(f), msgString(m)))
			continue
		}
		first[id] = m
	}
	return out
}

// checkPerUIDOrder (check 2): per object uid, resourceVersions strictly increase in stream
// order, and nothing follows a delete. An inferred delete carries the last identity the relay
// published, so it may repeat the resourceVersion of the event before it.
func checkPerUIDOrder(msgs []received) []string {
	var out []string
	last := make(map[string]received)
	for _, m := range msgs {
		rv, ok := parseRV(m.meta.ResourceVersion)
		if !ok {
			out = append(out, fmt.Sprintf("%s: resourceVersion is not an integer", msgString(m)))
			continue
		}
		prev, seen := last[m.meta.UID]
		last[m.meta.UID] = m
		if !seen {
			continue
		}
		if prev.meta.Type == event.Deleted {
			out = append(out, fmt.Sprintf("%s after the delete of the same uid (%s)", msgString(m), msgString(prev)))
			continue
		}
		prevRV, _ := parseRV(prev.meta.ResourceVersion)
		if rv > prevRV || rv == prevRV && inferredDelete(m) {
			continue
		}
		out = append(out, fmt.Sprintf("%s not after %s", msgString(m), msgString(prev)))
	}
	return out
}

// checkNothingMissing (check 3, strict): every change ground truth saw is in the stream as
// (type, uid, resourceVersion), and the stream holds nothing ground truth did not see. Only
// valid when neither the relay nor the ground-truth watcher lost history (no 410).
func checkNothingMissing(msgs []received, truth []truthChange) []string {
	var out []string
	type change struct {
		t       event.Type
		uid, rv string
	}
	inStream := make(map[change]bool, len(msgs))
	for _, m := range msgs {
		inStream[change{m.meta.Type, m.meta.UID, m.meta.ResourceVersion}] = true
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
		if !inTruth[change{m.meta.Type, m.meta.UID, m.meta.ResourceVersion}] {
			out = append(out, "not a change ground truth saw: "+msgString(m))
		}
	}
	return out
}

// checkFinalState (check 4): for every name the last event is a delete exactly when the object
// is gone, and otherwise carries the object's current uid and resourceVersion; every other uid
// the stream mentions ends with a delete, so that a consumer's view holds no ghost.
func checkFinalState(msgs []received, final map[string]objectState) []string {
	var out []string
	lastByKey := make(map[string]received)
	lastByUID := make(map[string]received)
	for _, m := range msgs {
		lastByKey[msgKey(m)] = m
		lastByUID[m.meta.UID] = m
	}
	for _, key := range sortedKeys(final) {
		want := final[key]
		m, ok := lastByKey[key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s (uid=%s rv=%s) exists but was never published", key, want.UID, want.RV))
		case m.meta.Type == event.Deleted:
			out = append(out, fmt.Sprintf("%s exists (uid=%s rv=%s) but the last event is %s", key, want.UID, want.RV, msgString(m)))
		case m.meta.UID != want.UID || m.meta.ResourceVersion != want.RV:
			out = append(out, fmt.Sprintf("%s is uid=%s rv=%s but the last event is %s", key, want.UID, want.RV, msgString(m)))
		}
	}
	for _, key := range sortedKeys(lastByKey) {
		if _, ok := final[key]; !ok && lastByKey[key].meta.Type != event.Deleted {
			out = append(out, fmt.Sprintf("%s is gone but the last event is %s", key, msgString(lastByKey[key])))
		}
	}
	for _, uid := range sortedKeys(lastByUID) {
		m := lastByUID[uid]
		if m.meta.Type == event.Deleted || final[msgKey(m)].UID == uid {
			continue
		}
		out = append(out, fmt.Sprintf("uid %s of %s is gone but its last event is %s", uid, msgKey(m), msgString(m)))
	}
	return out
}

// checkInferredDeletes (check 5): a delete inferred by a relist carries
// k8s-final-state-unknown: true, and no other event does.
func checkInferredDeletes(msgs []received) []string {
	var out []string
	for _, m := range msgs {
		got := m.header.Get(event.HeaderFinalStateUnknown)
		switch {
		case inferredDelete(m) && got != "true":
			out = append(out, fmt.Sprintf("%s: inferred delete without %s: true", msgString(m), event.HeaderFinalStateUnknown))
		case !inferredDelete(m) && got != "":
			out = append(out, fmt.Sprintf("%s: %s %q on an event that is not an inferred delete", msgString(m), event.HeaderFinalStateUnknown, got))
		}
	}
	return out
}

// checkKnownUIDs: every uid in the stream is one the load generator created (nothing phantom).
func checkKnownUIDs(msgs []received, uids map[string]bool) []string {
	var out []string
	reported := make(map[string]bool)
	for _, m := range msgs {
		if !uids[m.meta.UID] && !reported[m.meta.UID] {
			reported[m.meta.UID] = true
			out = append(out, "uid the generator never created: "+msgString(m))
		}
	}
	return out
}

// checkRelistDiff compares what the relay published after a relist with the difference between
// before (what it had published) and after (the cluster now): a delete for each vanished
// object (origin relist, final-state-unknown, the last published uid and resourceVersion), a
// delete and an add for a recreated one, a modified for a changed one, an add for a new one,
// and nothing at all for the unchanged.
func checkRelistDiff(msgs []received, before, after map[string]objectState) []string {
	type want struct {
		t       event.Type
		uid, rv string
	}
	got := byObject(msgs)
	keys := make(map[string]bool)
	for _, m := range []map[string]objectState{before, after} {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range got {
		keys[k] = true
	}
	var out []string
	for _, key := range sortedKeys(keys) {
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
			have = append(have, msgString(m))
		}
		problem := len(got[key]) != len(ws)
		for i := 0; !problem && i < len(ws); i++ {
			m := got[key][i]
			problem = m.meta.Type != ws[i].t || m.meta.UID != ws[i].uid || m.meta.ResourceVersion != ws[i].rv ||
				m.meta.Origin != event.Relist ||
				(m.meta.Type == event.Deleted) != (m.header.Get(event.HeaderFinalStateUnknown) == "true")
		}
		if problem {
			out = append(out, fmt.Sprintf("%s (%s): want %v (origin relist, deletes final-state-unknown), got [%s]",
				key, what, ws, strings.Join(have, "; ")))
		}
	}
	return out
}

// maxProblems is how many problems of one check a failure lists; the count says the rest.
const maxProblems = 25

// report fails t with a check's problems, if any.
func report(t *testing.T, check string, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		t.Logf("check %s: ok", check)
		return
	}
	shown := problems[:min(len(problems), maxProblems)]
	t.Errorf("check %s: %d problems:\n  %s", check, len(problems), strings.Join(shown, "\n  "))
}

// streamStats summarises messages for the log.
func streamStats(msgs []received) string {
	byType := map[event.Type]int{}
	byOrigin := map[event.Origin]int{}
	omitted, unknown := 0, 0
	for _, m := range msgs {
		byType[m.meta.Type]++
		byOrigin[m.meta.Origin]++
		if m.header.Get(event.HeaderBodyOmitted) != "" {
			omitted++
		}
		if m.header.Get(event.HeaderFinalStateUnknown) != "" {
			unknown++
		}
	}
	return fmt.Sprintf("%d messages: added %d, modified %d, deleted %d; live %d, initial-sync %d, relist %d; body omitted %d, final-state-unknown %d",
		len(msgs), byType[event.Added], byType[event.Modified], byType[event.Deleted],
		byOrigin[event.Live], byOrigin[event.InitialSync], byOrigin[event.Relist], omitted, unknown)
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

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

// truthWatcher is the ground truth: a watch of its own over one namespace's ConfigMaps,
// independent of the relay, recording every change in order. When its history expires (410)
// it relists and counts it: from then on its change list has a gap and strict checks are off.
type truthWatcher struct {
	cs kubernetes.Interface
	ns string

	mu      sync.Mutex
	changes []truthChange
	state   map[string]objectState
	relists int

	done chan struct{}
}

// startTruth lists the namespace and watches it until the test ends.
func startTruth(t *testing.T, cs kubernetes.Interface, ns string) *truthWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tw := &truthWatcher{cs: cs, ns: ns, done: make(chan struct{})}
	rv, err := tw.list(ctx)
	if err != nil {
		cancel()
		t.Fatalf("ground truth: %v", err)
	}
	go tw.loop(ctx, rv)
	t.Cleanup(func() { cancel(); <-tw.done })
	return tw
}

// list replaces the state with a fresh list; the changes between the last watched one and the
// list are unknown.
func (tw *truthWatcher) list(ctx context.Context) (string, error) {
	l, err := tw.cs.CoreV1().ConfigMaps(tw.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list configmaps in %s: %w", tw.ns, err)
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.state = make(map[string]objectState, len(l.Items))
	for _, cm := range l.Items {
		tw.state[cm.Namespace+"/"+cm.Name] = objectState{UID: string(cm.UID), RV: cm.ResourceVersion}
	}
	return l.ResourceVersion, nil
}

func (tw *truthWatcher) loop(ctx context.Context, rv string) {
	defer close(tw.done)
	for ctx.Err() == nil {
		err := tw.watch(ctx, &rv)
		for ctx.Err() == nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			var newRV string
			if newRV, err = tw.list(ctx); err == nil {
				rv = newRV
				tw.mu.Lock()
				tw.relists++
				tw.mu.Unlock()
			}
		}
		// A pause between watches keeps an apiserver outage from turning this into a spin.
		pause := 50 * time.Millisecond
		if err != nil {
			pause = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (tw *truthWatcher) watch(ctx context.Context, rv *string) error {
	w, err := tw.cs.CoreV1().ConfigMaps(tw.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: *rv, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil
		}
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("watch: unexpected object %T", ev.Object)
		}
		*rv = cm.ResourceVersion
		var t event.Type
		switch ev.Type {
		case watch.Added:
			t = event.Added
		case watch.Modified:
			t = event.Modified
		case watch.Deleted:
			t = event.Deleted
		default: // bookmark
			continue
		}
		c := truthChange{Type: t, Key: cm.Namespace + "/" + cm.Name, UID: string(cm.UID), RV: cm.ResourceVersion}
		tw.mu.Lock()
		tw.changes = append(tw.changes, c)
		if t == event.Deleted {
			delete(tw.state, c.Key)
		} else {
			tw.state[c.Key] = objectState{UID: c.UID, RV: c.RV}
		}
		tw.mu.Unlock()
	}
}

// snapshot returns the changes seen so far and how many times history was lost.
func (tw *truthWatcher) snapshot() ([]truthChange, int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]truthChange(nil), tw.changes...), tw.relists
}

// waitCaughtUp waits until the watcher's view equals final: it has then seen every change,
// since the writes have stopped and a watch delivers in order.
func (tw *truthWatcher) waitCaughtUp(t *testing.T, final map[string]objectState) {
	t.Helper()
	var diff string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		tw.mu.Lock()
		defer tw.mu.Unlock()
		diff = stateDiff(tw.state, final)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("ground truth never caught up with the cluster: %v: %s", err, diff)
	}
}

// stateDiff describes how got differs from want, "" when equal.
func stateDiff(got, want map[string]objectState) string {
	var d []string
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok || g != want[k] {
			d = append(d, fmt.Sprintf("%s: have %+v, want %+v", k, g, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s: have %+v, want absent", k, got[k]))
		}
	}
	if len(d) > 10 {
		d = append(d[:10], fmt.Sprintf("... %d more", len(d)-10))
	}
	return strings.Join(d, "; ")
}

// fakeMsg builds a received message as the relay would publish it, for the checker's tests.
func fakeMsg(seq uint64, t event.Type, name, uid, rv string, origin event.Origin, opts ...func(*received)) received {
	meta := event.Meta{Cluster: "c", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns",
		Name: name, UID: uid, ResourceVersion: rv, Type: t, Origin: origin}
	m := received{seq: seq, subject: meta.Subject("kube").String(), header: meta.Header(), meta: meta,
		body: map[string]any{"metadata": map[string]any{"name": name, "uid": uid, "resourceVersion": rv}}}
	if t == event.Deleted && origin == event.Relist {
		m.header.Set(event.HeaderFinalStateUnknown, "true")
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func TestFaultChecker(t *testing.T) {
	const A, M, D = event.Added, event.Modified, event.Deleted
	const L, R = event.Live, event.Relist
	good := []received{
		fakeMsg(1, A, "a", "u1", "10", L),
		fakeMsg(2, A, "b", "u2", "11", L),
		fakeMsg(3, M, "a", "u1", "12", L),
		fakeMsg(4, D, "b", "u2", "13", L),
		fakeMsg(5, A, "b", "u3", "14", L),
		fakeMsg(6, D, "b", "u3", "14", R), // inferred: repeats the last published rv
		fakeMsg(7, A, "b", "u4", "20", R),
	}
	truth := []truthChange{
		{A, "ns/a", "u1", "10"}, {A, "ns/b", "u2", "11"}, {M, "ns/a", "u1", "12"}, {D, "ns/b", "u2", "13"},
		{A, "ns/b", "u3", "14"}, {D, "ns/b", "u3", "14"}, {A, "ns/b", "u4", "20"},
	}
	final := map[string]objectState{"ns/a": {"u1", "12"}, "ns/b": {"u4", "20"}}
	with := func(msgs []received, i int, m received) []received {
		out := append([]received(nil), msgs...)
		out[i] = m
		return out
	}
	noBody := func(m *received) { m.body = nil }
	omitted := func(m *received) { m.body = nil; m.header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize) }
	noFSU := func(m *received) { m.header.Del(event.HeaderFinalStateUnknown) }
	fsu := func(m *received) { m.header.Set(event.HeaderFinalStateUnknown, "true") }
	tests := []struct {
		name  string
		check func([]received) []string
		msgs  []received
		fail  bool
	}{
		{"envelope ok", func(m []received) []string { return checkEnvelope(m, "kube") }, good, false},
		{"envelope body omitted ok", func(m []received) []string { return checkEnvelope(m, "kube") },
			with(good, 2, fakeMsg(3, M, "a", "u1", "12", L, omitted)), false},
		{"envelope wrong subject", func(m []received) []string { return checkEnvelope(m, "other") }, good, true},
		{"envelope missing body", func(m []received) []string { return checkEnvelope(m, "kube") },
			with(good, 2, fakeMsg(3, M, "a", "u1", "12", L, noBody)), true},
		{"envelope body disagrees", func(m []received) []string { return checkEnvelope(m, "kube") },
			with(good, 2, fakeMsg(3, M, "a", "u1", "12", L, func(m *received) { m.body["metadata"].(map[string]any)["resourceVersion"] = "9" })), true},
		{"no duplicates ok", checkNoDuplicateIDs, good, false},
		{"duplicate id", checkNoDuplicateIDs, append(good, fakeMsg(8, M, "a", "u1", "12", L)), true},
		{"order ok", checkPerUIDOrder, good, false},
		{"rv goes back", checkPerUIDOrder, with(good, 2, fakeMsg(3, M, "a", "u1", "9", L)), true},
		{"rv repeats on a live event", checkPerUIDOrder, with(good, 2, fakeMsg(3, M, "a", "u1", "10", L)), true},
		{"event after delete", checkPerUIDOrder, append(good, fakeMsg(8, M, "b", "u2", "30", L)), true},
		{"nothing missing ok", func(m []received) []string { return checkNothingMissing(m, truth) }, good, false},
		{"change missing", func(m []received) []string { return checkNothingMissing(m, truth) }, good[:6], true},
		{"change not in truth", func(m []received) []string { return checkNothingMissing(m, truth[:6]) }, good, true},
		{"final ok", func(m []received) []string { return checkFinalState(m, final) }, good, false},
		{"final stale rv", func(m []received) []string { return checkFinalState(m, final) }, good[:2], true},
		{"final never published", func(m []received) []string {
			return checkFinalState(m, map[string]objectState{"ns/a": {"u1", "12"}, "ns/b": {"u4", "20"}, "ns/c": {"u9", "30"}})
		}, good, true},
		{"final gone but not deleted", func(m []received) []string {
			return checkFinalState(m, map[string]objectState{"ns/a": {"u1", "12"}})
		}, good, true},
		{"final ghost uid", func(m []received) []string { return checkFinalState(m, final) },
			append(good[:5:5], fakeMsg(7, A, "b", "u4", "20", R)), true},
		{"inferred deletes ok", checkInferredDeletes, good, false},
		{"inferred delete unmarked", checkInferredDeletes, with(good, 5, fakeMsg(6, D, "b", "u3", "14", R, noFSU)), true},
		{"live event marked", checkInferredDeletes, with(good, 3, fakeMsg(4, D, "b", "u2", "13", L, fsu)), true},
		{"known uids ok", func(m []received) []string {
			return checkKnownUIDs(m, map[string]bool{"u1": true, "u2": true, "u3": true, "u4": true})
		}, good, false},
		{"unknown uid", func(m []received) []string {
			return checkKnownUIDs(m, map[string]bool{"u1": true, "u2": true, "u3": true})
		}, good, true},
	}
	// The relist diff of TestFaultExpiredHistoryWhileStopped: a unchanged, b updated, c
	// deleted, d recreated, e new, f created and deleted while nobody watched.
	before := map[string]objectState{"ns/a": {"u1", "10"}, "ns/b": {"u2", "11"}, "ns/c": {"u3", "12"}, "ns/d": {"u4", "13"}}
	after := map[string]objectState{"ns/a": {"u1", "10"}, "ns/b": {"u2", "20"}, "ns/d": {"u5", "21"}, "ns/e": {"u6", "22"}}
	diff := []received{
		fakeMsg(1, M, "b", "u2", "20", R),
		fakeMsg(2, D, "c", "u3", "12", R),
		fakeMsg(3, D, "d", "u4", "13", R),
		fakeMsg(4, A, "d", "u5", "21", R),
		fakeMsg(5, A, "e", "u6", "22", R),
	}
	relistDiff := func(m []received) []string { return checkRelistDiff(m, before, after) }
	tests = append(tests, []struct {
		name  string
		check func([]received) []string
		msgs  []received
		fail  bool
	}{
		{"relist diff ok", relistDiff, diff, false},
		{"relist diff republishes unchanged", relistDiff, append(diff, fakeMsg(6, A, "a", "u1", "10", R)), true},
		{"relist diff misses a delete", relistDiff, append(diff[:1:1], diff[2:]...), true},
		{"relist diff delete unmarked", relistDiff, with(diff, 1, fakeMsg(2, D, "c", "u3", "12", R, noFSU)), true},
		{"relist diff delete with another rv", relistDiff, with(diff, 1, fakeMsg(2, D, "c", "u3", "15", R)), true},
		{"relist diff recreate as modified", relistDiff, append(diff[:2:2], fakeMsg(3, M, "d", "u5", "21", R), diff[4]), true},
		{"relist diff live origin", relistDiff, with(diff, 0, fakeMsg(1, M, "b", "u2", "20", L)), true},
		{"relist diff of an unseen object", relistDiff, append(diff, fakeMsg(6, A, "f", "u7", "23", R)), true},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.check(tt.msgs)
			if tt.fail && len(got) == 0 {
				t.Errorf("got no problems, want some")
			}
			if !tt.fail && len(got) > 0 {
				t.Errorf("got problems %q, want none", got)
			}
		})
	}
}

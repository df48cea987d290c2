package main

import (
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

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

package contract

import (
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func fakeMsg(seq uint64, t event.Type, name, uid, rv string, origin event.Origin, opts ...func(*Message)) Message {
	meta := event.Meta{Cluster: "c", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns",
		Name: name, UID: uid, ResourceVersion: rv, Type: t, Origin: origin}
	m := Message{Seq: seq, Subject: meta.Subject("kube").String(), Header: meta.Header(), Meta: meta,
		Body: map[string]any{"metadata": map[string]any{"name": name, "uid": uid, "resourceVersion": rv}}}
	if t == event.Deleted && origin == event.Relist {
		m.Header.Set(event.HeaderFinalStateUnknown, "true")
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// TestChecksFailWhenTheContractBreaks shows every check passing a good stream and failing each
// way it can be broken: a check that cannot fail would let the fault tests pass on anything.
func TestChecksFailWhenTheContractBreaks(t *testing.T) {
	const A, M, D = event.Added, event.Modified, event.Deleted
	const L, R = event.Live, event.Relist
	good := []Message{
		fakeMsg(1, A, "a", "u1", "10", L),
		fakeMsg(2, A, "b", "u2", "11", L),
		fakeMsg(3, M, "a", "u1", "12", L),
		fakeMsg(4, D, "b", "u2", "13", L),
		fakeMsg(5, A, "b", "u3", "14", L),
		fakeMsg(6, D, "b", "u3", "14", R), // inferred: repeats the last published rv
		fakeMsg(7, A, "b", "u4", "20", R),
	}
	truth := []Change{
		{A, "ns/a", "u1", "10"}, {A, "ns/b", "u2", "11"}, {M, "ns/a", "u1", "12"}, {D, "ns/b", "u2", "13"},
		{A, "ns/b", "u3", "14"}, {D, "ns/b", "u3", "14"}, {A, "ns/b", "u4", "20"},
	}
	final := map[string]Object{"ns/a": {"u1", "12"}, "ns/b": {"u4", "20"}}
	with := func(msgs []Message, i int, m Message) []Message {
		out := append([]Message(nil), msgs...)
		out[i] = m
		return out
	}
	noBody := func(m *Message) { m.Body = nil }
	omitted := func(m *Message) { m.Body = nil; m.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize) }
	noFSU := func(m *Message) { m.Header.Del(event.HeaderFinalStateUnknown) }
	fsu := func(m *Message) { m.Header.Set(event.HeaderFinalStateUnknown, "true") }
	tests := []struct {
		name  string
		check func([]Message) []string
		msgs  []Message
		fail  bool
	}{
		{"envelope ok", func(m []Message) []string { return Envelope(m, "kube") }, good, false},
		{"envelope body omitted ok", func(m []Message) []string { return Envelope(m, "kube") },
			with(good, 2, fakeMsg(3, M, "a", "u1", "12", L, omitted)), false},
		{"envelope wrong subject", func(m []Message) []string { return Envelope(m, "other") }, good, true},
		{"envelope missing body", func(m []Message) []string { return Envelope(m, "kube") },
			with(good, 2, fakeMsg(3, M, "a", "u1", "12", L, noBody)), true},
		{"envelope body disagrees", func(m []Message) []string { return Envelope(m, "kube") },
			with(good, 2, fakeMsg(3, M, "a", "u1", "12", L, func(m *Message) { m.Body["metadata"].(map[string]any)["resourceVersion"] = "9" })), true},
		{"no duplicates ok", NoDuplicateIDs, good, false},
		{"duplicate id", NoDuplicateIDs, append(good, fakeMsg(8, M, "a", "u1", "12", L)), true},
		{"order ok", PerUIDOrder, good, false},
		{"rv goes back", PerUIDOrder, with(good, 2, fakeMsg(3, M, "a", "u1", "9", L)), true},
		{"rv repeats on a live event", PerUIDOrder, with(good, 2, fakeMsg(3, M, "a", "u1", "10", L)), true},
		{"event after delete", PerUIDOrder, append(good, fakeMsg(8, M, "b", "u2", "30", L)), true},
		{"nothing missing ok", func(m []Message) []string { return NothingMissing(m, truth) }, good, false},
		{"change missing", func(m []Message) []string { return NothingMissing(m, truth) }, good[:6], true},
		{"change not in truth", func(m []Message) []string { return NothingMissing(m, truth[:6]) }, good, true},
		{"final ok", func(m []Message) []string { return FinalState(m, final) }, good, false},
		{"final stale rv", func(m []Message) []string { return FinalState(m, final) }, good[:2], true},
		{"final never published", func(m []Message) []string {
			return FinalState(m, map[string]Object{"ns/a": {"u1", "12"}, "ns/b": {"u4", "20"}, "ns/c": {"u9", "30"}})
		}, good, true},
		{"final gone but not deleted", func(m []Message) []string {
			return FinalState(m, map[string]Object{"ns/a": {"u1", "12"}})
		}, good, true},
		{"final ghost uid", func(m []Message) []string { return FinalState(m, final) },
			append(good[:5:5], fakeMsg(7, A, "b", "u4", "20", R)), true},
		{"inferred deletes ok", InferredDeletes, good, false},
		{"inferred delete unmarked", InferredDeletes, with(good, 5, fakeMsg(6, D, "b", "u3", "14", R, noFSU)), true},
		{"live event marked", InferredDeletes, with(good, 3, fakeMsg(4, D, "b", "u2", "13", L, fsu)), true},
		{"known uids ok", func(m []Message) []string {
			return KnownUIDs(m, map[string]bool{"u1": true, "u2": true, "u3": true, "u4": true})
		}, good, false},
		{"unknown uid", func(m []Message) []string {
			return KnownUIDs(m, map[string]bool{"u1": true, "u2": true, "u3": true})
		}, good, true},
	}
	// The relist diff of TestFaultExpiredHistoryWhileStopped: a unchanged, b updated, c
	// deleted, d recreated, e new, f created and deleted while nobody watched.
	before := map[string]Object{"ns/a": {"u1", "10"}, "ns/b": {"u2", "11"}, "ns/c": {"u3", "12"}, "ns/d": {"u4", "13"}}
	after := map[string]Object{"ns/a": {"u1", "10"}, "ns/b": {"u2", "20"}, "ns/d": {"u5", "21"}, "ns/e": {"u6", "22"}}
	diff := []Message{
		fakeMsg(1, M, "b", "u2", "20", R),
		fakeMsg(2, D, "c", "u3", "12", R),
		fakeMsg(3, D, "d", "u4", "13", R),
		fakeMsg(4, A, "d", "u5", "21", R),
		fakeMsg(5, A, "e", "u6", "22", R),
	}
	relistDiff := func(m []Message) []string { return RelistDiff(m, before, after) }
	tests = append(tests, []struct {
		name  string
		check func([]Message) []string
		msgs  []Message
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

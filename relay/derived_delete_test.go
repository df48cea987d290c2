package relay

import (
	"context"
	"slices"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/nats-io/nats.go"
)

// readyOrGone is a DerivingRules whose deletes are filtered, with two state conditions:
// ready holds for every object, gone for a delete.
type readyOrGone struct{ defaultRules }

func (readyOrGone) Decide(c Change) Verdict {
	if c.Type == event.Deleted {
		return Verdict{Reason: "events"}
	}
	return Verdict{Publish: true}
}

func (readyOrGone) Derive(c Change, held []string) Derivation {
	d := Derivation{Held: []string{"ready"}}
	if c.Type == event.Deleted {
		d.Held = []string{"gone", "ready"}
	}
	for _, name := range d.Held {
		if !slices.Contains(held, name) {
			d.Fired = append(d.Fired, DerivedEvent{Name: name})
		}
	}
	return d
}

// TestIntakeDerivesAFilteredDeleteOfAnObjectTheIndexDoesNotHoldFromItsLastState is the replay
// of a filtered delete whose index removal was written before a kill (the checkpoint had not
// passed it): the index no longer holds the object, the stream's last ordinary event of it is
// an older modified, its last ready the original rise. The conditions that held for the
// object's last state (ready) are taken as held: only gone, which the delete makes hold,
// fires, not ready again under the delete's id.
func TestIntakeDerivesAFilteredDeleteOfAnObjectTheIndexDoesNotHoldFromItsLastState(t *testing.T) {
	ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(readyOrGone{}))
	obj := cm("ns", "a", "uid-1", "12")
	del := ti.in.src.meta(obj, event.Deleted, event.Live)
	modified := del
	modified.Type, modified.ResourceVersion = event.Modified, "10"
	ready := modified
	ready.Derived, ready.ResourceVersion = "ready", "8"
	ti.in.src.published = streamLast{
		"kube.c.core.v1.configmaps.ns.a.*":               modified,
		"kube.c.core.v1.configmaps.*.*.*.derived.*":      ready,
		"kube.c.core.v1.configmaps.ns.a.*.derived.ready": ready,
	}
	if err := ti.in.offer(t.Context(), object{Unstructured: obj}, event.Deleted, event.Live, "12", false); err != nil {
		t.Fatalf("offer: %v", err)
	}
	it := ti.next(t)
	if got, want := derivedNames(t, it), []string{"gone"}; !slices.Equal(got, want) {
		t.Errorf("derived events queued: got %q, want %q", got, want)
	}
	if it.rv != "12" {
		t.Errorf("checkpoint: got %q, want 12", it.rv)
	}
}

// TestARefusedChangesIndexRecordHasItsOwnMessageID: the record written when NATS refuses a
// change's event for good must not share the change's own record's id, or JetStream's
// duplicate window would drop the own record of a replay of that change whose event is
// accepted.
func TestARefusedChangesIndexRecordHasItsOwnMessageID(t *testing.T) {
	ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(alwaysReady{}),
		withIndexed(map[string]entry{"ns/a": {UID: "uid-1", ResourceVersion: "5"}}))
	ti.in.src.objIdx = recordingIndex{}
	if err := ti.in.offer(t.Context(), object{Unstructured: cm("ns", "a", "uid-1", "12")}, event.Modified, event.Live, "12", true); err != nil {
		t.Fatalf("offer: %v", err)
	}
	it := ti.next(t)
	if it.index == nil || it.refusedIndex == nil {
		t.Fatalf("index record %v, refused record %v: want both", it.index, it.refusedIndex)
	}
	own, refused := it.index.Header.Get(nats.MsgIdHdr), it.refusedIndex.Header.Get(nats.MsgIdHdr)
	if own == refused || refused != it.msg.Header.Get(nats.MsgIdHdr)+":index-refused" {
		t.Errorf("refused record id %q (own record %q), want the event's id with :index-refused", refused, own)
	}
}

// recordingIndex is an ObjectIndex whose records are bare messages on the object's subject.
type recordingIndex struct{}

func (recordingIndex) Load(context.Context, string, func(object, uid, rv string, held []string)) (IndexJournal, error) {
	return nil, nil
}

func (recordingIndex) Record(_, object, _, _ string, _ []string) *nats.Msg {
	return nats.NewMsg("index." + object)
}

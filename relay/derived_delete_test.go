package relay

import (
	"slices"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
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

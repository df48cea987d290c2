package relay

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// alwaysReady is a DerivingRules with one state condition, ready, that holds for every
// object: it fires on a change whose object it did not hold for before.
type alwaysReady struct{ defaultRules }

func (alwaysReady) Derive(_ Change, held []string) Derivation {
	d := Derivation{Held: []string{"ready"}}
	if len(held) == 0 {
		d.Fired = []DerivedEvent{{Name: "ready"}}
	}
	return d
}

// streamLast is a PublishedLog holding the last message of each subject it is asked about
// (a subject it does not hold has none).
type streamLast map[string]event.Meta

func (s streamLast) LastMessage(_ context.Context, subject string) (nats.Header, []byte, bool, error) {
	m, ok := s[subject]
	if !ok {
		return nil, nil, false, nil
	}
	return m.Header(), nil, true, nil
}

// derivedNames returns the derived event names of the messages of it.
func derivedNames(t *testing.T, it *item) []string {
	t.Helper()
	var names []string
	for _, msg := range it.derived {
		m, err := event.MetaFromHeader(msg.Header)
		if err != nil {
			t.Fatalf("derived event on %s: %v", msg.Subject, err)
		}
		names = append(names, m.Derived)
	}
	return names
}

// TestIntakeReplaysTheDerivedEventsOfAnAddedWhoseOwnEventAloneWasPublished is the failover
// (or kill) that falls between an added's own event and its derived events: the stream holds
// the event, neither its derived events nor its index record were written, and the replay
// from the checkpoint must publish the derived events, once.
func TestIntakeReplaysTheDerivedEventsOfAnAddedWhoseOwnEventAloneWasPublished(t *testing.T) {
	for _, tt := range []struct {
		name    string
		derived bool // the stream holds the added's derived event too
		want    int
	}{
		{"the derived event is missing from the stream", false, 1},
		{"the derived event is in the stream", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A re-created object: the index still holds the uid deleted before it.
			ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(alwaysReady{}),
				withIndexed(map[string]entry{"ns/a": {UID: "uid-0", ResourceVersion: "5", Held: "ready"}}))
			obj := cm("ns", "a", "uid-1", "12")
			own := ti.in.src.meta(obj, event.Added, event.Live)
			ready := own
			ready.Derived = "ready"
			other := ready
			other.Name, other.UID = "b", "uid-b"
			log := streamLast{
				"kube.c.core.v1.configmaps.ns.a.*":               own,
				"kube.c.core.v1.configmaps.*.*.*.derived.*":      other,
				"kube.c.core.v1.configmaps.ns.a.*.derived.ready": ready,
			}
			if !tt.derived {
				older := ready
				older.UID, older.ResourceVersion = "uid-0", "4"
				log["kube.c.core.v1.configmaps.ns.a.*.derived.ready"] = older
			}
			ti.in.src.published = log
			if err := ti.in.change(t.Context(), object{Unstructured: obj}, watch.Added); err != nil {
				t.Fatalf("change: %v", err)
			}
			it := ti.next(t)
			if got := describeItem(t, it); got != "added ns/a uid-1@12 live ckpt 12" {
				t.Fatalf("queued %q, want the added", got)
			}
			if got := derivedNames(t, it); len(got) != tt.want {
				t.Errorf("derived events queued: got %q, want %d ready", got, tt.want)
			}
			if e, _ := ti.in.index.get("ns/a"); e.UID != "uid-1" || e.Held != "ready" {
				t.Errorf("index: got %+v, want uid-1 holding ready", e)
			}
		})
	}
}

// TestIntakeTakesAStateEventPublishedAfterTheIndexRecordForHeld is the relist after a kill
// between a rise's ack and its index record, the object changed since: the stream's last
// ready event of the object is later than the index record (same uid), so the condition
// already rose: nothing is published, and the index records it held. A later event of
// another uid, or one older than the record, does not count. The relisted change may be
// past the replay horizon (the object changed after the restart, before the relist): the
// record it follows is not, and the look-up is made.
func TestIntakeTakesAStateEventPublishedAfterTheIndexRecordForHeld(t *testing.T) {
	for _, tt := range []struct {
		name     string
		uid, rv  string // of the stream's last ready event of ns/a
		horizon  string
		want     int
		wantHeld string
	}{
		{"a rise after the record", "uid-1", "8", "", 0, "ready"},
		{"a rise after the record, the change past the horizon", "uid-1", "8", "10", 0, "ready"},
		{"a rise before the record", "uid-1", "4", "", 1, "ready"},
		{"a rise before the record, the change past the horizon", "uid-1", "4", "10", 1, "ready"},
		{"another object's rise", "uid-0", "8", "", 1, "ready"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(alwaysReady{}),
				withIndexed(map[string]entry{"ns/a": {UID: "uid-1", ResourceVersion: "5"}}))
			ti.in.setHorizon(tt.horizon)
			obj := cm("ns", "a", "uid-1", "12")
			ready := ti.in.src.meta(obj, event.Modified, event.Relist)
			ready.Derived = "ready"
			last := ready
			last.UID, last.ResourceVersion, last.Type, last.Origin = tt.uid, tt.rv, event.Modified, event.Live
			ti.in.src.published = streamLast{
				"kube.c.core.v1.configmaps.*.*.*.derived.*":      last,
				"kube.c.core.v1.configmaps.ns.a.*.derived.ready": last,
			}
			if err := ti.in.offer(t.Context(), object{Unstructured: obj}, event.Modified, event.Relist, "", true); err != nil {
				t.Fatalf("offer: %v", err)
			}
			it := ti.next(t)
			if got := derivedNames(t, it); len(got) != tt.want {
				t.Errorf("derived events queued: got %q, want %d ready", got, tt.want)
			}
			if e, _ := ti.in.index.get("ns/a"); e.Held != tt.wantHeld {
				t.Errorf("index: got %+v, want holding %q", e, tt.wantHeld)
			}
		})
	}
}

func TestStateFromBodyReadsTheObjectOfEveryPayload(t *testing.T) {
	h := func(kv ...string) nats.Header {
		out := nats.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tt := range []struct {
		name string
		h    nats.Header
		body string
		want string // data.state, "" for nil
	}{
		{"the bare object", h(), `{"data":{"state":"ready"}}`, "ready"},
		{"object and old", h(event.HeaderPayload, string(event.PayloadObjectAndOld)), `{"object":{"data":{"state":"ready"}},"oldObject":{}}`, "ready"},
		{"the body omitted", h(event.HeaderBodyOmitted, event.BodyOmittedOversize), `{"data":{"state":"ready"}}`, ""},
		{"no body", h(), ``, ""},
		{"not an object", h(), `[1]`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := stateFromBody(tt.h, []byte(tt.body))
			data, _ := obj["data"].(map[string]any)
			got, _ := data["state"].(string)
			if got != tt.want || (tt.want == "") != (obj == nil) {
				t.Errorf("got %v, want data.state %q", obj, tt.want)
			}
		})
	}
}

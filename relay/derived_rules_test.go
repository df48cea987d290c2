package relay

import (
	"context"
	"slices"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestRuleSinceKnowsAStateConditionOnlyFromEntriesWrittenAfterItWasAdded(t *testing.T) {
	rs, changed := parseRuleSince("ready=100").update([]string{"ready", "stalled"}, "250")
	if !changed || rs.String() != "ready=100,stalled=250" {
		t.Fatalf("update: got %q (changed %v), want ready=100,stalled=250 changed", rs.String(), changed)
	}
	if again, changed := parseRuleSince(rs.String()).update([]string{"stalled", "ready"}, "900"); changed || again.String() != rs.String() {
		t.Errorf("update with the same names: got %q (changed %v), want it unchanged", again.String(), changed)
	}
	if dropped, changed := rs.update([]string{"stalled"}, "900"); !changed || dropped.String() != "stalled=250" {
		t.Errorf("update without ready: got %q (changed %v), want stalled=250 changed", dropped.String(), changed)
	}
	for _, tt := range []struct {
		name string
		rv   string
		want []string
	}{
		{"written before both", "90", []string{"ready", "stalled"}},
		{"written when ready was added", "100", []string{"ready", "stalled"}},
		{"written between", "180", []string{"stalled"}},
		{"written after both", "251", nil},
		{"a resourceVersion that is not an integer", "abc", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rs.unknown(entry{UID: "u", ResourceVersion: tt.rv}); !slices.Equal(got, tt.want) {
				t.Errorf("unknown: got %q, want %q", got, tt.want)
			}
		})
	}
	if got := parseRuleSince("ready=").unknown(entry{ResourceVersion: "1"}); got != nil {
		t.Errorf("a condition known since an empty index: got unknown %q, want none", got)
	}
	if got := parseRuleSince("garbage,=5,ok=7"); got.String() != "ok=7" {
		t.Errorf("parse: got %q, want only ok=7", got.String())
	}
}

// namedReady is alwaysReady naming its state condition, ready (a StateNamer).
type namedReady struct{ alwaysReady }

func (namedReady) StateNames() []string  { return []string{"ready"} }
func (namedReady) Holds(Change) []string { return []string{"ready"} }

// keyedCheckpoints is a Checkpointer in memory, one value per key.
type keyedCheckpoints map[string]string

func (k keyedCheckpoints) Load(_ context.Context, key string) (string, bool, error) {
	v, ok := k[key]
	return v, ok, nil
}

func (k keyedCheckpoints) Save(_ context.Context, key, v string) error {
	k[key] = v
	return nil
}

// TestRuleSinceWithoutARecordTakesEveryEntryToKnowTheStateConditions is the upgrade from a
// release that ran the same derived rules without the record: its index entries know ready
// (here: it did not hold at 5), so the object's first change that makes ready hold publishes
// it. With a record that does not name ready (ready added to a deployment that has one), the
// entry does not know it, and the change takes it as the baseline.
func TestRuleSinceWithoutARecordTakesEveryEntryToKnowTheStateConditions(t *testing.T) {
	for _, tt := range []struct {
		name   string
		record map[string]string
		want   []string
	}{
		{"no record", map[string]string{}, []string{"ready"}},
		{"a record without ready", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(namedReady{}),
				withIndexed(map[string]entry{"ns/a": {UID: "uid-1", ResourceVersion: "5"}}))
			ckpt := keyedCheckpoints(tt.record)
			if ckpt == nil {
				ckpt = keyedCheckpoints{DerivedRulesKeyPrefix + ti.in.src.key: "other=3"}
			}
			ti.in.src.ckpt = ckpt
			if err := ti.in.src.loadRuleSince(t.Context(), "5"); err != nil {
				t.Fatalf("loadRuleSince: %v", err)
			}
			if err := ti.in.offer(t.Context(), object{Unstructured: cm("ns", "a", "uid-1", "12")}, event.Modified, event.Live, "12", true); err != nil {
				t.Fatalf("offer: %v", err)
			}
			if got := derivedNames(t, ti.next(t)); !slices.Equal(got, tt.want) {
				t.Errorf("derived events queued: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDerivedRulesRecordSizeBoundsTheRecordOfTheLongestResourceVersions(t *testing.T) {
	names := []string{"ready", "stalled", "a"}
	rs, _ := ruleSince{}.update(names, "18446744073709551615")
	if got, want := DerivedRulesRecordSize(names), len(rs.String()); got != want {
		t.Errorf("got %d, want %d, the length of %q", got, want, rs.String())
	}
}

// TestAStateConditionAddedToARunningDeploymentTakesTheFirstChangeAsItsBaseline is the
// documented gap: ready is known from 5 on (the record), the object's entry at 5 does not
// know it. Without the previous state, the first change that finds ready holding takes it as
// the baseline and publishes nothing, recording ready as held; with the previous state (not
// ready), the same change publishes the rise.
func TestAStateConditionAddedToARunningDeploymentTakesTheFirstChangeAsItsBaseline(t *testing.T) {
	for _, tt := range []struct {
		name string
		old  map[string]any
		want []string
	}{
		{"without the previous state", nil, nil},
		{"with a previous state it did not hold for", map[string]any{"data": map[string]any{"state": "pending"}}, []string{"ready"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(readyState{}),
				withIndexed(map[string]entry{"ns/a": {UID: "uid-1", ResourceVersion: "5"}}))
			ti.in.src.ckpt = keyedCheckpoints{DerivedRulesKeyPrefix + ti.in.src.key: "ready=5"}
			if err := ti.in.src.loadRuleSince(t.Context(), "5"); err != nil {
				t.Fatalf("loadRuleSince: %v", err)
			}
			if tt.old != nil {
				ti.in.cache = shapedCache{"ns/a": tt.old}
			}
			obj := cm("ns", "a", "uid-1", "12")
			obj.Object["data"] = map[string]any{"state": "ready"}
			if err := ti.in.offer(t.Context(), object{Unstructured: obj}, event.Modified, event.Live, "12", true); err != nil {
				t.Fatalf("offer: %v", err)
			}
			if got := derivedNames(t, ti.next(t)); !slices.Equal(got, tt.want) {
				t.Errorf("derived events queued: got %q, want %q", got, tt.want)
			}
			if e, _ := ti.in.index.get("ns/a"); e.Held != "ready" || e.ResourceVersion != "12" {
				t.Errorf("index: got %+v, want ready held at 12", e)
			}
		})
	}
}

// readyState is a StateNamer whose state condition ready holds when data.state is "ready".
type readyState struct{ defaultRules }

func (readyState) StateNames() []string { return []string{"ready"} }

func (r readyState) Holds(c Change) []string { return r.Derive(c, nil).Held }

func (readyState) Derive(c Change, held []string) Derivation {
	var d Derivation
	if bodyField(c.Object, "data", "state") == "ready" {
		d.Held = []string{"ready"}
		if !slices.Contains(held, "ready") {
			d.Fired = []DerivedEvent{{Name: "ready"}}
		}
	}
	return d
}

// TestRuleSinceIsRecordedWithoutStateConditions: a source whose derived rules have no state
// condition yet (only transitions) records that, so that a state condition added later is
// new, not taken as known by every entry as with no record at all.
func TestRuleSinceIsRecordedWithoutStateConditions(t *testing.T) {
	ti := newTestIntake(t, &scriptedReader{list: noList(t)}, withRules(namedReady{}))
	ckpt := keyedCheckpoints{}
	ti.in.src.ckpt = ckpt
	ti.in.src.rules = transitionsOnly{}
	if err := ti.in.src.loadRuleSince(t.Context(), "5"); err != nil {
		t.Fatalf("loadRuleSince: %v", err)
	}
	ti.in.src.rules = namedReady{}
	if err := ti.in.src.loadRuleSince(t.Context(), "9"); err != nil {
		t.Fatalf("loadRuleSince: %v", err)
	}
	if got, want := ckpt[DerivedRulesKeyPrefix+ti.in.src.key], "ready=9"; got != want {
		t.Errorf("record: got %q, want %q", got, want)
	}
}

// transitionsOnly is a StateNamer without state conditions.
type transitionsOnly struct{ alwaysReady }

func (transitionsOnly) StateNames() []string  { return nil }
func (transitionsOnly) Holds(Change) []string { return nil }

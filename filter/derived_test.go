package filter

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// readyCondition is the library's pod ready rule: a state condition.
const readyCondition = `object.status.?conditions.orValue([]).exists(c, c.type == "Ready" && c.status == "True")`

var pods = event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}

func TestParseDerivedProblems(t *testing.T) {
	const rule = "resources[0] (pods)"
	head := "resources:\n- resource: pods\n  derived:\n"
	tests := []struct {
		name string
		in   string
		want wantProblem
	}{
		{name: "not a list", in: "resources:\n- resource: pods\n  derived: ready\n",
			want: wantProblem{rule: rule, field: "derived", msg: "must be a list"}},
		{name: "item not a mapping", in: head + "  - ready\n",
			want: wantProblem{rule: rule, field: "derived[0]", msg: "must be a mapping"}},
		{name: "unknown field", in: head + "  - {name: a, condition: 'true', when: x}\n",
			want: wantProblem{rule: rule, field: "derived[0].when", msg: "unknown field"}},
		{name: "name not a string", in: head + "  - {name: [a], condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: "must be a string, got array"}},
		{name: "fields not a list", in: head + "  - {name: a, condition: 'true', fields: status}\n",
			want: wantProblem{rule: rule, field: "derived[0].fields", msg: "must be a list of strings, got string"}},
		{name: "missing name", in: head + "  - {condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: "required"}},
		{name: "missing condition", in: head + "  - {name: a}\n",
			want: wantProblem{rule: rule, field: "derived[0].condition", msg: "required"}},
		{name: "upper-case name", in: head + "  - {name: Ready, condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: `"Ready": want lower-case`}},
		{name: "name with a dot", in: head + "  - {name: a.b, condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: "want lower-case"}},
		{name: "name ending in a dash", in: head + "  - {name: a-, condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: "want lower-case"}},
		{name: "name too long", in: head + "  - {name: " + strings.Repeat("a", 64) + ", condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: "64 bytes, longer than 63"}},
		{name: "name is an event type", in: head + "  - {name: modified, condition: 'true'}\n",
			want: wantProblem{rule: rule, field: "derived[0].name", msg: "is an event type"}},
		{name: "duplicate name", in: head + "  - {name: a, condition: 'true'}\n  - {name: b, condition: 'true'}\n  - {name: a, condition: 'false'}\n",
			want: wantProblem{rule: rule, field: "derived[2].name", msg: "duplicate: \"a\" is also derived[0]"}},
		{name: "cel syntax", in: head + "  - {name: a, condition: 'object.x =='}\n",
			want: wantProblem{rule: rule, field: "derived[0].condition", msg: "Syntax error", exprLine: 1, exprCol: 12}},
		{name: "cel not bool", in: head + "  - {name: a, condition: 'eventType'}\n",
			want: wantProblem{rule: rule, field: "derived[0].condition", msg: "must evaluate to bool"}},
		{name: "bad projection", in: head + "  - {name: a, condition: 'true', fields: ['a..b']}\n",
			want: wantProblem{rule: rule, field: "derived[0].fields[0]", msg: "empty segment", exprLine: 1, exprCol: 3}},
		{name: "in defaults", in: "defaults:\n  derived: [{name: a, condition: 'true'}]\n",
			want: wantProblem{rule: "defaults", field: "derived", msg: "not allowed in defaults"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("rules.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse = %+v, nil; want a problem", f)
			}
			checkProblem(t, err, "rules.yaml", tt.want)
		})
	}
}

func TestParseDerivedListsEveryProblemOfEveryItem(t *testing.T) {
	in := "resources:\n- resource: pods\n  derived:\n  - {name: A, condition: 'x'}\n  - {name: b}\n"
	_, err := Parse("rules.yaml", []byte(in))
	for _, want := range []wantProblem{
		{rule: "resources[0] (pods)", field: "derived[0].name", msg: "lower-case"},
		{rule: "resources[0] (pods)", field: "derived[0].condition", msg: "undeclared reference"},
		{rule: "resources[0] (pods)", field: "derived[1].condition", msg: "required"},
	} {
		checkProblem(t, err, "rules.yaml", want)
	}
}

func TestParseDerivedKeepsTheRule(t *testing.T) {
	in := "resources:\n- resource: pods\n  derived:\n  - name: ready\n    condition: '" + readyCondition + "'\n    fields: [status.conditions]\n"
	f, err := Parse("rules.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Derived{{Name: "ready", Condition: readyCondition, Fields: []string{"status.conditions"}}}
	if got := f.Resources[0].Derived; !slices.EqualFunc(got, want, func(a, b Derived) bool {
		return a.Name == b.Name && a.Condition == b.Condition && slices.Equal(a.Fields, b.Fields)
	}) {
		t.Errorf("derived: got %+v, want %+v", got, want)
	}
}

func pod(t testing.TB, ready string) map[string]any {
	t.Helper()
	if ready == "" {
		return obj(t, `{"metadata": {"name": "p", "uid": "u"}, "status": {"phase": "Pending"}}`)
	}
	return obj(t, `{"metadata": {"name": "p", "uid": "u"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "`+ready+`"}]}}`)
}

func TestDeriveFiresStateConditionsOnlyWhenTheyStartToHold(t *testing.T) {
	p := mustCompile(t, Rule{Derived: []Derived{
		{Name: "ready", Condition: readyCondition},
		{Name: "gone", Condition: `eventType == "deleted"`},
		{Name: "flipped", Condition: `oldObject != null && has(oldObject.status.conditions) && has(object.status.conditions) &&
			oldObject.status.conditions[0].status != object.status.conditions[0].status`},
	}}, pods)
	if !p.NeedsOld() {
		t.Errorf("NeedsOld: got false, want true (a transition condition reads oldObject)")
	}
	if _, _, ok := p.AsRead(); ok {
		t.Errorf("AsRead: got true, want false (conditions read the body)")
	}
	tests := []struct {
		name      string
		c         Change
		held      []string
		wantFired []string
		wantHeld  []string
	}{
		{name: "new object not ready", c: Change{Type: event.Added, Object: pod(t, "")}},
		{name: "new object ready counts as rising", c: Change{Type: event.Added, Object: pod(t, "True")},
			wantFired: []string{"ready"}, wantHeld: []string{"ready"}},
		{name: "becomes ready", c: Change{Type: event.Modified, Object: pod(t, "True"), Old: pod(t, "False")},
			wantFired: []string{"ready", "flipped"}, wantHeld: []string{"ready"}},
		{name: "stays ready: nothing fires", c: Change{Type: event.Modified, Object: pod(t, "True"), Old: pod(t, "True")},
			held: []string{"ready"}, wantHeld: []string{"ready"}},
		{name: "held decides, not the old object", c: Change{Type: event.Modified, Object: pod(t, "True"), Old: pod(t, "False")},
			held: []string{"ready"}, wantFired: []string{"flipped"}, wantHeld: []string{"ready"}},
		{name: "falls: nothing fires, nothing held", c: Change{Type: event.Modified, Object: pod(t, "False"), Old: pod(t, "True")},
			held: []string{"ready"}, wantFired: []string{"flipped"}},
		{name: "delete of a ready object", c: Change{Type: event.Deleted, Object: pod(t, "True"), Old: pod(t, "True")},
			held: []string{"ready"}, wantFired: []string{"gone"}, wantHeld: []string{"gone", "ready"}},
		{name: "names no longer in the rule are dropped", c: Change{Type: event.Modified, Object: pod(t, "")},
			held: []string{"removed-rule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Derive(context.Background(), tt.c, tt.held)
			if d.Err != nil {
				t.Fatalf("Derive: %v", d.Err)
			}
			if !slices.Equal(d.Fired, tt.wantFired) || !slices.Equal(d.Held, tt.wantHeld) {
				t.Errorf("Derive: got fired %q held %q, want fired %q held %q", d.Fired, d.Held, tt.wantFired, tt.wantHeld)
			}
		})
	}
}

func TestDeriveErrorKeepsTheConditionAsItWas(t *testing.T) {
	p := mustCompile(t, Rule{Derived: []Derived{{Name: "bad", Condition: `object.spec.missing == 1`}}}, pods)
	for _, held := range [][]string{nil, {"bad"}} {
		d := p.Derive(context.Background(), Change{Type: event.Modified, Object: pod(t, "")}, held)
		if d.Err == nil || len(d.Fired) != 0 || !slices.Equal(d.Held, held) {
			t.Errorf("held %q: got fired %q held %q err %v, want nothing fired, held unchanged, an error", held, d.Fired, d.Held, d.Err)
		}
	}
	if got := p.EvalErrors(); got != 2 {
		t.Errorf("EvalErrors: got %d, want 2", got)
	}
}

// TestHoldsReadsOnlyStateConditionsAndCountsNoError: Holds reads the state of an object the
// relay has no record for; a transition condition is no state, and a failed condition counts
// as not holding without taking the rule's first error (which Derive then still reports).
func TestHoldsReadsOnlyStateConditionsAndCountsNoError(t *testing.T) {
	p := mustCompile(t, Rule{Derived: []Derived{
		{Name: "ready", Condition: readyCondition},
		{Name: "gone", Condition: `eventType == "deleted"`},
		{Name: "bad", Condition: `object.spec.missing == 1`},
		{Name: "flipped", Condition: `oldObject == null || oldObject != object`},
	}}, pods)
	ctx := context.Background()
	if got, want := p.Holds(ctx, Change{Type: event.Modified, Object: pod(t, "True")}), []string{"ready"}; !slices.Equal(got, want) {
		t.Errorf("Holds of a ready pod: got %q, want %q", got, want)
	}
	if got, want := p.Holds(ctx, Change{Type: event.Deleted, Object: pod(t, "False")}), []string{"gone"}; !slices.Equal(got, want) {
		t.Errorf("Holds of a deleted pod: got %q, want %q", got, want)
	}
	if got := p.EvalErrors(); got != 0 {
		t.Errorf("EvalErrors after Holds: got %d, want 0", got)
	}
	if d := p.Derive(ctx, Change{Type: event.Modified, Object: pod(t, "")}, nil); d.Err == nil || !d.FirstError {
		t.Errorf("Derive after Holds: got err %v first %v, want the rule's first error", d.Err, d.FirstError)
	}
}

func TestDerivedBodyProjectsOnlyWhenAsked(t *testing.T) {
	p := mustCompile(t, Rule{Derived: []Derived{
		{Name: "ready", Condition: readyCondition, Fields: []string{"status.phase"}},
		{Name: "plain", Condition: "true"},
	}}, pods)
	body, ok, err := p.DerivedBody("ready", pod(t, "True"))
	if err != nil || !ok {
		t.Fatalf("DerivedBody(ready): %v, %v", ok, err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"name":"p","uid":"u"},"status":{"phase":"Running"}}`
	if string(body) != want {
		t.Errorf("DerivedBody(ready): got %s, want %s", body, want)
	}
	if _, ok, _ := p.DerivedBody("plain", pod(t, "True")); ok {
		t.Errorf("DerivedBody(plain): got a body, want the change's own (ok false)")
	}
	if p := mustCompile(t, Rule{}, pods); p.HasDerived() {
		t.Errorf("HasDerived of a rule without derived events: got true")
	}
}

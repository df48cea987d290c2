package filter

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestLoadExample(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "rules.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := len(f.Resources), 3; got != want {
		t.Fatalf("got %d rules, want %d", got, want)
	}
	pods := f.Resources[0]
	if pods.Resource != "pods" || *pods.LabelSelector != "app=web" || *pods.Payload != PayloadObjectAndPatch ||
		!reflect.DeepEqual(pods.Namespaces, []string{"default", "prod"}) || !*pods.QuietUpdates || *pods.StripManagedFields {
		t.Errorf("pods rule = %+v", pods)
	}
	if f.Resources[1].RedactSecrets == nil || *f.Resources[1].RedactSecrets {
		t.Errorf("secrets rule RedactSecrets = %v, want false", f.Resources[1].RedactSecrets)
	}
	rules := f.Rules()
	if got := rules[2].ExcludeNamespaces; !reflect.DeepEqual(got, []string{"kube-system"}) {
		t.Errorf("leases excludeNamespaces = %v, want the defaults' [kube-system]", got)
	}
	for i, r := range rules {
		res := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: strings.Split(r.Resource, ".")[0]}}
		if _, err := Compile(r, res); err != nil {
			t.Errorf("Compile(rules[%d]): %v", i, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want os.ErrNotExist", err)
	}
}

func TestParseJSON(t *testing.T) {
	f, err := Parse("rules.json", []byte(`{"resources": [{"resource": "deployments.apps", "events": ["deleted"]}]}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := f.Resources[0].Events; !reflect.DeepEqual(got, []string{"deleted"}) {
		t.Errorf("events = %v, want [deleted]", got)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "{}", "resources: []\n", "resources:\ndefaults:\n"} {
		f, err := Parse("rules.yaml", []byte(in))
		if err != nil || f == nil || len(f.Resources) != 0 {
			t.Errorf("Parse(%q) = %+v, %v; want an empty file", in, f, err)
		}
	}
}

func TestMergePrecedence(t *testing.T) {
	in := `
defaults:
  stripManagedFields: false
  labelSelector: "tier=back"
  events: [added]
  sensitive: [spec.a]
  namespaces: [a, b]
resources:
  - resource: pods                 # inherits everything
  - resource: services             # overrides with explicit values
    stripManagedFields: true
    labelSelector: ""
    events: [deleted]
    sensitive: [spec.b]
    namespaces: []
`
	f, err := Parse("rules.yaml", []byte(in))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	rules := f.Rules()
	inherit, override := rules[0], rules[1]
	if *inherit.StripManagedFields || *inherit.LabelSelector != "tier=back" ||
		!reflect.DeepEqual(inherit.Events, []string{"added"}) || !reflect.DeepEqual(inherit.Sensitive, []string{"spec.a"}) ||
		!reflect.DeepEqual(inherit.Namespaces, []string{"a", "b"}) {
		t.Errorf("inheriting rule = %+v", inherit)
	}
	if !*override.StripManagedFields || *override.LabelSelector != "" ||
		!reflect.DeepEqual(override.Events, []string{"deleted"}) || !reflect.DeepEqual(override.Sensitive, []string{"spec.b"}) ||
		override.Namespaces == nil || len(override.Namespaces) != 0 {
		t.Errorf("overriding rule = %+v", override)
	}

	// Built-in defaults fill what neither sets; the file's defaults
	// override them.
	pods := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
	builtin := mustCompile(t, Rule{}, pods)
	fromDefaults := mustCompile(t, inherit, pods)
	fromRule := mustCompile(t, override, pods)
	obj := map[string]any{"metadata": map[string]any{"name": "x", "managedFields": []any{"m"}}}
	if _, ok := builtin.Shape(obj)["metadata"].(map[string]any)["managedFields"]; ok {
		t.Errorf("built-in default kept managedFields")
	}
	if _, ok := fromDefaults.Shape(obj)["metadata"].(map[string]any)["managedFields"]; !ok {
		t.Errorf("defaults' stripManagedFields: false did not keep managedFields")
	}
	if _, ok := fromRule.Shape(obj)["metadata"].(map[string]any)["managedFields"]; ok {
		t.Errorf("rule's stripManagedFields: true did not override the defaults")
	}
	if got := fromDefaults.LabelSelector(); got != "tier=back" {
		t.Errorf("LabelSelector = %q, want tier=back", got)
	}
	if got := fromRule.LabelSelector(); got != "" {
		t.Errorf("LabelSelector = %q, want the rule's explicit empty selector", got)
	}
	if got := fromRule.ServerNamespaces(); got != nil {
		t.Errorf("ServerNamespaces = %v, want nil (all) from the rule's explicit []", got)
	}
	if fromDefaults.Events("deleted") || !fromRule.Events("deleted") {
		t.Errorf("events not overridden")
	}
	if !builtin.Events("added") || !builtin.Events("modified") || !builtin.Events("deleted") {
		t.Errorf("built-in default does not publish every event type")
	}
}

func TestEmptyWhenTurnsDefaultsOff(t *testing.T) {
	f, err := Parse("rules.yaml", []byte("defaults:\n  when: 'false'\nresources:\n- resource: pods\n  when: ''\n- resource: services\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	rules := f.Rules()
	c := Change{Type: "added", Object: map[string]any{}}
	if d := mustCompile(t, rules[0], podsRes).Decide(context.Background(), c); !d.Publish {
		t.Errorf("pods with when '': %+v, want published", d)
	}
	if d := mustCompile(t, rules[1], podsRes).Decide(context.Background(), c); d.Publish || d.Reason != ReasonWhen {
		t.Errorf("services with the defaults' when: %+v, want suppressed by when", d)
	}
}

func TestNonMappingRuleReportedOnce(t *testing.T) {
	_, err := Parse("rules.yaml", []byte("resources: [pods, {resource: a}]\n"))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Rule != "resources[0]" {
		t.Fatalf("got %v, want one problem on resources[0]", err)
	}
}

func TestMergeResourceIsOwn(t *testing.T) {
	got := Merge(Rule{Resource: "a", When: new("true")}, Rule{Resource: "b"})
	if got.Resource != "b" || got.When == nil || *got.When != "true" {
		t.Errorf("Merge = %+v", got)
	}
}

// mustCompile compiles rule or fails the test.
func mustCompile(t testing.TB, rule Rule, res event.Resource) *Program {
	t.Helper()
	p, err := Compile(rule, res)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "rules.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	for _, s := range []string{
		"", "resources:\n- resource: pods\n", `{"defaults": {"events": ["added"]}}`,
		"resources:\n- resource: pods\n  when: 'object.?a.orValue(1) == 1'\n  fields: ['a[*][\"b.c\"]']\n",
		"resources: [{resource: a, namespaces: [x], excludeNamespaces: [x]}]", "defaults: {quietFields: [a]}",
		"resources: [{resource: pods, derived: [{name: ready, condition: 'object.?s.orValue(1) == 1', fields: [status]}, {name: x, condition: 'oldObject == null'}]}]",
		"resources: [{resource: pods, derived: []}]", "resources: [{resource: pods, derived: [{name: a}, {}, 3]}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("error %v is not a *ValidationError with problems", err)
			}
			for _, p := range ve.Problems {
				if p.File != "fuzz.yaml" || p.Message == "" {
					t.Fatalf("problem %+v lacks file or message", p)
				}
			}
			return
		}
		// A valid file, written out again, is valid and the same.
		out, err := json.Marshal(file)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := Parse("again.json", out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if !reflect.DeepEqual(file, again) {
			t.Fatalf("re-parse differs:\n%+v\n%+v", file, again)
		}
		for _, r := range file.Rules() {
			if _, err := Compile(r, event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: r.Resource}}); err != nil && !strings.Contains(err.Error(), "redactSecrets") {
				t.Fatalf("Compile of a valid rule %+v: %v", r, err)
			}
		}
	})
}

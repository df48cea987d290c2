package filter

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestNeedsOld(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		want bool
	}{
		{name: "nothing", rule: Rule{}, want: false},
		{name: "when on object only", rule: Rule{When: new(`object.status.phase == "Running"`)}, want: false},
		{name: "when on oldObject", rule: Rule{When: new(`oldObject == null`)}, want: true},
		{name: "when on oldObject in a macro", rule: Rule{When: new(`has(object.x) && [1].all(i, has(oldObject.y))`)}, want: true},
		{name: "quiet updates", rule: Rule{QuietUpdates: new(true)}, want: true},
		{name: "quiet fields imply quiet updates", rule: Rule{QuietFields: []string{"status.x"}}, want: true},
		{name: "quiet updates off", rule: Rule{QuietUpdates: new(false)}, want: false},
		{name: "payload object", rule: Rule{Payload: new(PayloadObject)}, want: false},
		{name: "payload objectAndOld", rule: Rule{Payload: new(PayloadObjectAndOld)}, want: true},
		{name: "payload objectAndPatch", rule: Rule{Payload: new(PayloadObjectAndPatch)}, want: true},
		{name: "projection and redaction", rule: Rule{Fields: []string{"spec"}, Sensitive: []string{"spec.x"}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustCompile(t, tt.rule, podsRes).NeedsOld(); got != tt.want {
				t.Errorf("NeedsOld() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAsRead(t *testing.T) {
	secrets := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}
	tests := []struct {
		name                     string
		rule                     Rule
		res                      event.Resource
		wantManaged, wantApplied bool
		wantOK                   bool
	}{
		{name: "defaults", rule: Rule{}, res: podsRes, wantManaged: true, wantApplied: true, wantOK: true},
		{name: "event types and selectors only", rule: Rule{Events: []string{"deleted"}, LabelSelector: new("a=b"), ExcludeNamespaces: []string{"x"}}, res: podsRes, wantManaged: true, wantApplied: true, wantOK: true},
		{name: "stripping off", rule: Rule{StripManagedFields: new(false), StripLastApplied: new(false)}, res: podsRes, wantOK: true},
		{name: "when", rule: Rule{When: new(`object.metadata.name == "a"`)}, res: podsRes, wantManaged: true, wantApplied: true},
		{name: "quiet updates", rule: Rule{QuietUpdates: new(true)}, res: podsRes, wantManaged: true, wantApplied: true},
		{name: "projection", rule: Rule{Fields: []string{"spec"}}, res: podsRes, wantManaged: true, wantApplied: true},
		{name: "sensitive", rule: Rule{Sensitive: []string{"spec.x"}}, res: podsRes, wantManaged: true, wantApplied: true},
		{name: "payload with the old object", rule: Rule{Payload: new(PayloadObjectAndOld)}, res: podsRes, wantManaged: true, wantApplied: true},
		{name: "secrets are redacted", rule: Rule{}, res: secrets, wantManaged: true, wantApplied: true},
		{name: "secrets not redacted", rule: Rule{RedactSecrets: new(false)}, res: secrets, wantManaged: true, wantApplied: true, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			managed, applied, ok := mustCompile(t, tt.rule, tt.res).AsRead()
			if ok != tt.wantOK || (ok && (managed != tt.wantManaged || applied != tt.wantApplied)) {
				t.Errorf("AsRead() = %v, %v, %v; want %v, %v, %v", managed, applied, ok, tt.wantManaged, tt.wantApplied, tt.wantOK)
			}
		})
	}
}

func TestEvents(t *testing.T) {
	p := mustCompile(t, Rule{Events: []string{"added", "deleted"}}, podsRes)
	for typ, want := range map[event.Type]bool{event.Added: true, event.Modified: false, event.Deleted: true, "bookmark": false, "": false} {
		if got := p.Events(typ); got != want {
			t.Errorf("Events(%q) = %v, want %v", typ, got, want)
		}
	}
}

func TestNamespace(t *testing.T) {
	p := mustCompile(t, Rule{
		Namespaces:        []string{"prod", "kube-system", "dev"},
		ExcludeNamespaces: []string{"staging"},
		NamespaceSelector: new("team=payments,env!=test"),
	}, podsRes)
	payments := map[string]string{"team": "payments"}
	tests := []struct {
		name   string
		ns     string
		labels map[string]string
		want   bool
	}{
		{name: "matching labels", ns: "prod", labels: payments, want: true},
		{name: "other team", ns: "prod", labels: map[string]string{"team": "search"}, want: false},
		{name: "negative requirement", ns: "dev", labels: map[string]string{"team": "payments", "env": "test"}, want: false},
		{name: "labels unknown", ns: "prod", labels: nil, want: false},
		{name: "excluded even when labels match", ns: "staging", labels: payments, want: false},
		{name: "not in server-side list is not checked here", ns: "other", labels: payments, want: true},
		{name: "cluster-scoped", ns: "", labels: nil, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Namespace(tt.ns, tt.labels); got != tt.want {
				t.Errorf("Namespace(%q, %v) = %v, want %v", tt.ns, tt.labels, got, tt.want)
			}
		})
	}
	if sel := p.NamespaceSelector(); sel == nil || sel.String() != "env!=test,team=payments" {
		t.Errorf("NamespaceSelector() = %v", sel)
	}
	if got := p.ServerNamespaces(); !slices.Equal(got, []string{"prod", "kube-system", "dev"}) {
		t.Errorf("ServerNamespaces() = %v", got)
	}
}

func TestNamespaceWithoutSelector(t *testing.T) {
	p := mustCompile(t, Rule{ExcludeNamespaces: []string{"kube-system"}}, podsRes)
	if p.NamespaceSelector() != nil {
		t.Errorf("NamespaceSelector() = %v, want nil", p.NamespaceSelector())
	}
	if !p.Namespace("default", nil) || p.Namespace("kube-system", nil) {
		t.Errorf("exclusion without selector is wrong")
	}
	empty := mustCompile(t, Rule{NamespaceSelector: new("")}, podsRes)
	if empty.NamespaceSelector() != nil {
		t.Errorf("an empty namespaceSelector must mean none")
	}
}

func TestAccessors(t *testing.T) {
	p := mustCompile(t, Rule{
		LabelSelector: new("app=web"),
		FieldSelector: new("spec.nodeName=n1"),
		Payload:       new(PayloadObjectAndOld),
	}, podsRes)
	if p.LabelSelector() != "app=web" || p.FieldSelector() != "spec.nodeName=n1" || p.Payload() != PayloadObjectAndOld ||
		p.Resource() != podsRes || p.ServerNamespaces() != nil || p.String() != "pods.v1" {
		t.Errorf("accessors: %q %q %q %v %v %q", p.LabelSelector(), p.FieldSelector(), p.Payload(), p.Resource(), p.ServerNamespaces(), p)
	}
	d := mustCompile(t, Rule{}, event.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}})
	if d.LabelSelector() != "" || d.FieldSelector() != "" || d.Payload() != PayloadObject || d.String() != "deployments.v1.apps" {
		t.Errorf("defaults: %q %q %q %q", d.LabelSelector(), d.FieldSelector(), d.Payload(), d)
	}
}

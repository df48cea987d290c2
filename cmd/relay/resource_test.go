package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParseResourceSpec(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ResourceSpec
		wantGR  schema.GroupResource
		wantGVR *schema.GroupVersionResource
	}{
		{
			name:   "core resource",
			in:     "pods",
			want:   ResourceSpec{Raw: "pods", Resource: "pods"},
			wantGR: schema.GroupResource{Resource: "pods"},
		},
		{
			name:   "resource and group",
			in:     "deployments.apps",
			want:   ResourceSpec{Raw: "deployments.apps", Resource: "deployments", Group: "apps"},
			wantGR: schema.GroupResource{Group: "apps", Resource: "deployments"},
		},
		{
			name:    "resource, version and group",
			in:      "deployments.v1.apps",
			want:    ResourceSpec{Raw: "deployments.v1.apps", Resource: "deployments", Version: "v1", Group: "apps"},
			wantGR:  schema.GroupResource{Group: "v1.apps", Resource: "deployments"},
			wantGVR: &schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		},
		{
			name:    "dotted group",
			in:      "widgets.example.com",
			want:    ResourceSpec{Raw: "widgets.example.com", Resource: "widgets", Group: "example.com"},
			wantGR:  schema.GroupResource{Group: "example.com", Resource: "widgets"},
			wantGVR: &schema.GroupVersionResource{Group: "com", Version: "example", Resource: "widgets"},
		},
		{
			name:    "beta version of a dotted group",
			in:      "foo.v1beta2.example.com",
			want:    ResourceSpec{Raw: "foo.v1beta2.example.com", Resource: "foo", Version: "v1beta2", Group: "example.com"},
			wantGR:  schema.GroupResource{Group: "v1beta2.example.com", Resource: "foo"},
			wantGVR: &schema.GroupVersionResource{Group: "example.com", Version: "v1beta2", Resource: "foo"},
		},
		{
			name:    "three segments keep both readings",
			in:      "widgets.stable.example.com",
			want:    ResourceSpec{Raw: "widgets.stable.example.com", Resource: "widgets", Group: "stable.example.com"},
			wantGR:  schema.GroupResource{Group: "stable.example.com", Resource: "widgets"},
			wantGVR: &schema.GroupVersionResource{Group: "example.com", Version: "stable", Resource: "widgets"},
		},
		{
			name:    "alpha version",
			in:      "things.v2alpha1.example.com",
			want:    ResourceSpec{Raw: "things.v2alpha1.example.com", Resource: "things", Version: "v2alpha1", Group: "example.com"},
			wantGR:  schema.GroupResource{Group: "v2alpha1.example.com", Resource: "things"},
			wantGVR: &schema.GroupVersionResource{Group: "example.com", Version: "v2alpha1", Resource: "things"},
		},
		{
			name:   "second segment that cannot be a version",
			in:     "vaults.1password.com",
			want:   ResourceSpec{Raw: "vaults.1password.com", Resource: "vaults", Group: "1password.com"},
			wantGR: schema.GroupResource{Group: "1password.com", Resource: "vaults"},
		},
		{
			name:    "long group",
			in:      "clusterroles.rbac.authorization.k8s.io",
			want:    ResourceSpec{Raw: "clusterroles.rbac.authorization.k8s.io", Resource: "clusterroles", Group: "rbac.authorization.k8s.io"},
			wantGR:  schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			wantGVR: &schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "rbac", Resource: "clusterroles"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResourceSpec(tt.in)
			if err != nil {
				t.Fatalf("ParseResourceSpec(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if gr := got.GroupResource(); gr != tt.wantGR {
				t.Errorf("GroupResource: got %+v, want %+v", gr, tt.wantGR)
			}
			gvr, ok := got.GroupVersionResource()
			if tt.wantGVR == nil && ok {
				t.Errorf("GroupVersionResource: got %+v, want none", gvr)
			}
			if tt.wantGVR != nil && (!ok || gvr != *tt.wantGVR) {
				t.Errorf("GroupVersionResource: got %+v, %v, want %+v", gvr, ok, *tt.wantGVR)
			}
		})
	}
}

func TestParseResourceSpecRejects(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty", "", "empty resource"},
		{"blank", " ", "whitespace"},
		{"inner space", "pods ,secrets", "whitespace"},
		{"tab", "pods\t", "whitespace"},
		{"kind instead of resource", "Deployment", "lower case"},
		{"upper-case group", "deployments.Apps", "lower case"},
		{"subresource", "pods/log", "subresources"},
		{"leading dot", ".apps", "missing resource name"},
		{"trailing dot", "deployments.", `API group ""`},
		{"empty segment", "deployments..apps", `API group ".apps"`},
		{"underscore in resource", "my_widgets.example.com", `resource name "my_widgets"`},
		{"resource starting with a digit", "3dmodels.example.com", `resource name "3dmodels"`},
		{"wildcard", "*", `resource name "*"`},
		{"bad group character", "widgets.exa$mple.com", `API group "exa$mple.com"`},
		{"resource too long", strings.Repeat("a", 64), "DNS-1035 label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResourceSpec(tt.in)
			if err == nil {
				t.Fatalf("ParseResourceSpec(%q): got %+v, want error containing %q", tt.in, got, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// testRESTMapper is built the way restmapper.NewDiscoveryRESTMapper builds
// kubectl's mapper from discovery: one mapper per group version, tried in
// order of preference. It knows core/v1 pods, apps/v1 (preferred) and
// apps/v1beta2 deployments, and widgets both in stable.example.com/v1 and in
// example.com/v1.
func testRESTMapper() meta.RESTMapper {
	kinds := []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "apps", Version: "v1beta2", Kind: "Deployment"},
		{Group: "stable.example.com", Version: "v1", Kind: "Widget"},
		{Group: "example.com", Version: "v1", Kind: "Widget"},
	}
	var (
		multi            meta.MultiRESTMapper
		resourcePriority []schema.GroupVersionResource
		kindPriority     []schema.GroupVersionKind
	)
	for _, gvk := range kinds {
		gv := gvk.GroupVersion()
		m := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
		m.Add(gvk, meta.RESTScopeNamespace)
		multi = append(multi, m)
		resourcePriority = append(resourcePriority, gv.WithResource(meta.AnyResource))
		kindPriority = append(kindPriority, gv.WithKind(meta.AnyKind))
	}
	return meta.PriorityRESTMapper{Delegate: multi, ResourcePriority: resourcePriority, KindPriority: kindPriority}
}

func TestResourceSpecRESTMapping(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    schema.GroupVersionResource
		wantErr bool
	}{
		{"core", "pods", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, false},
		{"group picks preferred version", "deployments.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, false},
		{"explicit version", "deployments.v1beta2.apps", schema.GroupVersionResource{Group: "apps", Version: "v1beta2", Resource: "deployments"}, false},
		{"dotted group", "widgets.example.com", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, false},
		{"explicit version of a dotted group", "widgets.v1.example.com", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, false},
		{"unserved version falls back to the group reading", "widgets.stable.example.com", schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "widgets"}, false},
		{"unknown version", "deployments.v9.apps", schema.GroupVersionResource{}, true},
		{"unknown resource", "gadgets", schema.GroupVersionResource{}, true},
	}
	mapper := testRESTMapper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := ParseResourceSpec(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			mapping, err := spec.RESTMapping(mapper)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got mapping %+v, want error", mapping.Resource)
				}
				if !strings.Contains(err.Error(), tt.in) {
					t.Errorf("got error %q, want it to name %q", err, tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("RESTMapping: %v", err)
			}
			if mapping.Resource != tt.want {
				t.Errorf("got %+v, want %+v", mapping.Resource, tt.want)
			}
		})
	}
}

func FuzzParseResourceSpec(f *testing.F) {
	for _, seed := range []string{
		"pods", "deployments.apps", "deployments.v1.apps", "widgets.example.com",
		"foo.v1beta2.example.com", "vaults.1password.com", "", ".", "a..b", "Pods",
		"pods/log", "a.b.c.d.e", "x.-y.z", "\u00e9t\u00e9s.example.com",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		spec, err := ParseResourceSpec(in)
		if err != nil {
			return
		}
		if spec.Raw != in || spec.String() != in {
			t.Fatalf("ParseResourceSpec(%q): got Raw %q and String %q, want the input", in, spec.Raw, spec.String())
		}
		again, err := ParseResourceSpec(spec.String())
		if err != nil || again != spec {
			t.Fatalf("reparse of %q: got %+v, %v, want %+v", spec.String(), again, err, spec)
		}
		if gr := spec.GroupResource(); gr.String() != in {
			t.Fatalf("GroupResource of %q: got %q", in, gr.String())
		}

		// Both readings agree with kubectl's parser. kubectl also offers a
		// version that cannot exist; this parser drops it.
		kubeGVR, kubeGR := schema.ParseResourceArg(in)
		if gr := spec.GroupResource(); gr != kubeGR {
			t.Fatalf("GroupResource of %q: got %+v, kubectl %+v", in, gr, kubeGR)
		}
		gvr, ok := spec.GroupVersionResource()
		switch {
		case ok && (kubeGVR == nil || gvr != *kubeGVR):
			t.Fatalf("GroupVersionResource of %q: got %+v, kubectl %+v", in, gvr, kubeGVR)
		case !ok && kubeGVR != nil && isVersionName(kubeGVR.Version):
			t.Fatalf("GroupVersionResource of %q: got none, kubectl %+v", in, *kubeGVR)
		}
		if spec.Version != "" && (!ok || gvr != schema.GroupVersionResource{Group: spec.Group, Version: spec.Version, Resource: spec.Resource}) {
			t.Fatalf("GroupVersionResource of %q: got %+v, %v, want the fields' reading %+v", in, gvr, ok, spec)
		}
		if ok && gvr.Resource+"."+gvr.Version+"."+gvr.Group != in {
			t.Fatalf("GroupVersionResource of %q: got %+v, which does not spell the input", in, gvr)
		}
	})
}

// isVersionName reports whether s could name an API version: the apiserver
// requires a DNS-1035 label.
func isVersionName(s string) bool {
	return len(validation.IsDNS1035Label(s)) == 0
}

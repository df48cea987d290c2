package event

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

var kvKeyRe = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$`)

func FuzzKeyTokenRoundTrip(f *testing.F) {
	for _, s := range []string{"", "=", "a.b", "system:controller:x", "kube-root-ca.crt", "日本", "=41",
		strings.Repeat("k", MaxKeyTokenLen), strings.Repeat("k", MaxKeyTokenLen+1), strings.Repeat(".", MaxKeyTokenLen/3+1),
		"\xff\x00 \r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EncodeKeyToken(s)
		if !kvKeyRe.MatchString(tok) {
			t.Fatalf("EncodeKeyToken(%q) = %q: not a key token", s, tok)
		}
		got, err := DecodeKeyToken(tok)
		if err != nil || got != s {
			t.Fatalf("DecodeKeyToken(EncodeKeyToken(%q)) = %q, %v", s, got, err)
		}
		bounded := KeyToken(s)
		if len(bounded) > MaxKeyTokenLen || !kvKeyRe.MatchString(bounded) {
			t.Fatalf("KeyToken(%q) = %q (%d bytes): want a key token of at most %d bytes", s, bounded, len(bounded), MaxKeyTokenLen)
		}
		if hashed := IsHashedKeyToken(bounded); hashed != (len(tok) > MaxKeyTokenLen) || !hashed && bounded != tok {
			t.Fatalf("KeyToken(%q) = %q: want EncodeKeyToken's %d bytes in full up to %d, hashed beyond", s, bounded, len(tok), MaxKeyTokenLen)
		}
	})
}

func TestMirrorKey(t *testing.T) {
	tests := []struct {
		name                  string
		cluster               string
		gr                    schema.GroupResource
		namespace, objectName string
		want                  string
	}{
		{"core namespaced", "prod", schema.GroupResource{Resource: "configmaps"}, "default", "kube-root-ca.crt", "prod.core.configmaps.default.kube-root-ca=2Ecrt"},
		{"cluster-scoped with group", "prod", schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, "", "system:view", "prod.rbac=2Eauthorization=2Ek8s=2Eio.clusterroles._.system=3Aview"},
		{"group literally named core", "prod", schema.GroupResource{Group: "core", Resource: "things"}, "ns", "a", "prod.=63ore.things.ns.a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MirrorKey(tt.cluster, tt.gr, tt.namespace, tt.objectName)
			if got != tt.want {
				t.Errorf("MirrorKey: got %q, want %q", got, tt.want)
			}
			if !kvKeyRe.MatchString(got) {
				t.Errorf("MirrorKey %q is not a valid key", got)
			}
		})
	}
}

func TestMirrorFilterSelectsOneResourceAsKubernetesNamesIt(t *testing.T) {
	tests := []struct {
		name      string
		cluster   string
		gr        schema.GroupResource
		namespace string
		want      string
	}{
		{name: "core group is Group empty", cluster: "prod", gr: schema.GroupResource{Resource: "configmaps"}, want: "prod.core.configmaps.*.*"},
		{name: "named group, one namespace", cluster: "prod", gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, namespace: "default", want: "prod.apps.deployments.default.*"},
		{name: "dotted group, every cluster", gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, want: "*.networking=2Ek8s=2Eio.ingresses.*.*"},
		{name: "values cannot inject wildcards", cluster: "prod", gr: schema.GroupResource{Resource: "configmaps"}, namespace: "*", want: "prod.core.configmaps.=2A.*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MirrorFilter(tt.cluster, tt.gr, tt.namespace)
			if err != nil || got != tt.want {
				t.Errorf("MirrorFilter: got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestMirrorFilterRefusesWhatSelectsNothing(t *testing.T) {
	tests := []struct {
		name      string
		gr        schema.GroupResource
		namespace string
		says      []string
	}{
		{name: "group core", gr: schema.GroupResource{Group: "core", Resource: "configmaps"}, says: []string{`group "core"`, `Group ""`}},
		{name: "no resource", gr: schema.GroupResource{Group: "apps"}, says: []string{`resource ""`}},
		{name: "namespace placeholder", gr: schema.GroupResource{Resource: "namespaces"}, namespace: "_", says: []string{`namespace "_"`, "leave namespace empty"}},
		{name: "every problem at once", gr: schema.GroupResource{Group: "core"}, namespace: "_", says: []string{`group "core"`, `resource ""`, `namespace "_"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MirrorFilter("prod", tt.gr, tt.namespace)
			if !errors.Is(err, ErrInvalidFilter) {
				t.Fatalf("MirrorFilter: got %q, %v, want an error wrapping %v", got, err, ErrInvalidFilter)
			}
			for _, want := range tt.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("MirrorFilter: got error %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

package event

import (
	"regexp"
	"strings"
	"testing"
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

func TestMirrorKeyAndFilter(t *testing.T) {
	tests := []struct {
		name                                   string
		cluster, group, resource, namespace, n string
		want                                   string
	}{
		{"core namespaced", "prod", "", "configmaps", "default", "kube-root-ca.crt", "prod.core.configmaps.default.kube-root-ca=2Ecrt"},
		{"cluster-scoped with group", "prod", "rbac.authorization.k8s.io", "clusterroles", "", "system:view", "prod.rbac=2Eauthorization=2Ek8s=2Eio.clusterroles._.system=3Aview"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MirrorKey(tt.cluster, tt.group, tt.resource, tt.namespace, tt.n)
			if got != tt.want {
				t.Errorf("MirrorKey: got %q, want %q", got, tt.want)
			}
			if !kvKeyRe.MatchString(got) {
				t.Errorf("MirrorKey %q is not a valid key", got)
			}
		})
	}
	if got, want := MirrorFilter("prod", "", "", "default"), "prod.*.*.default.*"; got != want {
		t.Errorf("MirrorFilter: got %q, want %q", got, want)
	}
	if got, want := MirrorFilter("prod", "apps", "deployments", ""), "prod.apps.deployments.*.*"; got != want {
		t.Errorf("MirrorFilter: got %q, want %q", got, want)
	}
}

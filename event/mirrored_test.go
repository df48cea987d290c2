package event

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"slices"
	"testing"
)

func TestMirroredListsRoundTripThroughBucketMetadata(t *testing.T) {
	tests := []struct {
		name     string
		metadata map[string]string
		want     map[string][]string
		ok       bool
	}{
		{name: "bucket of an older relay has no list", metadata: map[string]string{"owner": "ops", "_nats.ver": "2.15.2"}, want: map[string][]string{}},
		{name: "one list per cluster, other keys ignored", ok: true,
			metadata: map[string]string{
				MirroredMetadataKey("east"): FormatMirrored([]string{MirroredToken(schema.GroupResource{Group: "", Resource: "configmaps"}), MirroredToken(schema.GroupResource{Group: "apps", Resource: "deployments"}), MirroredToken(schema.GroupResource{Group: "", Resource: "configmaps"})}),
				MirroredMetadataKey("west"): FormatMirrored([]string{MirroredToken(schema.GroupResource{Group: "core", Resource: "widgets"})}),
				"owner":                     "ops",
			},
			want: map[string][]string{"east": {"apps.deployments", "core.configmaps"}, "west": {"=63ore.widgets"}}},
		{name: "an empty list is a list", metadata: map[string]string{MirroredMetadataKey("east"): ""}, ok: true,
			want: map[string][]string{"east": nil}},
		{name: "a key without a cluster is none", metadata: map[string]string{"kube-nats-relay.mirrored.": "core.secrets"}, want: map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseMirrored(tt.metadata)
			if ok != tt.ok || len(got) != len(tt.want) {
				t.Fatalf("ParseMirrored: got %v, %v, want %v, %v", got, ok, tt.want, tt.ok)
			}
			for cluster, tokens := range tt.want {
				if !slices.Equal(got[cluster], tokens) {
					t.Errorf("ParseMirrored: cluster %s: got %q, want %q", cluster, got[cluster], tokens)
				}
			}
		})
	}
}

func TestMirroredTokensAreTheMirrorKeysTokens(t *testing.T) {
	for _, gr := range [][2]string{{"", "configmaps"}, {"apps", "deployments"}, {"core", "widgets"}, {"example.com", "my.things"}} {
		key := MirrorKey("prod", schema.GroupResource{Group: gr[0], Resource: gr[1]}, "ns", "name")
		if want := "prod." + MirroredToken(schema.GroupResource{Group: gr[0], Resource: gr[1]}) + ".ns.name"; key != want {
			t.Errorf("MirroredToken(%q, %q): got key %q, want %q", gr[0], gr[1], want, key)
		}
	}
	if got, want := MirroredMetadataKey("prod"), "kube-nats-relay.mirrored.prod"; got != want {
		t.Errorf("MirroredMetadataKey: got %q, want %q", got, want)
	}
}

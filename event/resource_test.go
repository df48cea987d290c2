package event

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResourceIsWrittenAsKubectlWritesIt(t *testing.T) {
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		want string
	}{
		{"core group", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "configmaps.v1"},
		{"named group", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "deployments.v1.apps"},
		{"version not yet resolved", schema.GroupVersionResource{Group: "apps", Resource: "deployments"}, "deployments.apps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Resource{GroupVersionResource: tt.gvr, Kind: "K", Namespaced: true}).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

package relay

import "testing"

func TestSubjectCovers(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		want   bool
	}{
		{"same", "kube.prod.>", true},
		{"wider", "kube.>", true},
		{"widest", ">", true},
		{"wildcard cluster", "kube.*.>", true},
		{"other cluster", "kube.dev.>", false},
		{"other prefix", "k8s.prod.>", false},
		{"narrower", "kube.prod.core.>", false},
		{"single token wildcard only", "kube.prod.*", false},
		{"exact other", "kube.prod", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subjectCovers(tt.filter, "kube.prod.>"); got != tt.want {
				t.Errorf("subjectCovers(%q, kube.prod.>): got %v, want %v", tt.filter, got, tt.want)
			}
		})
	}
}

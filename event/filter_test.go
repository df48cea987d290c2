package event

import (
	"errors"
	"testing"
)

func TestFilterString(t *testing.T) {
	tests := []struct {
		name string
		in   Filter
		want string
	}{
		{name: "everything", in: Filter{Prefix: "kube"}, want: "kube.*.*.*.*.*.*.*"},
		{
			name: "deleted deployments of one cluster",
			in:   Filter{Prefix: "kube", Cluster: "prod", Group: "apps", Resource: "deployments", Type: Deleted},
			want: "kube.prod.apps.*.deployments.*.*.deleted",
		},
		{name: "core group", in: Filter{Prefix: "kube", CoreGroup: true, Resource: "pods"}, want: "kube.*.core.*.pods.*.*.*"},
		{name: "cluster-scoped", in: Filter{Prefix: "kube", ClusterScoped: true}, want: "kube.*.*.*.*._.*.*"},
		{name: "group literally core", in: Filter{Prefix: "kube", Group: "core"}, want: "kube.*.~63ore.*.*.*.*.*"},
		{name: "namespace literally underscore", in: Filter{Prefix: "kube", Namespace: "_"}, want: "kube.*.*.*.*.~5F.*.*"},
		{name: "values cannot inject wildcards", in: Filter{Prefix: "kube", Name: "*", Namespace: ">"}, want: "kube.*.*.*.*.~3E.~2A.*"},
		{
			name: "every field set",
			in: Filter{Prefix: "a.b", Cluster: "c", Group: "networking.k8s.io", Version: "v1",
				Resource: "ingresses", Namespace: "web", Name: "x.y", Type: Added},
			want: "a.b.c.networking~2Ek8s~2Eio.v1.ingresses.web.x~2Ey.added",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.in.Validate(); err != nil {
				t.Fatalf("Validate(): got %v, want nil", err)
			}
			if got := tt.in.String(); got != tt.want {
				t.Errorf("String(): got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFilterMatchesSubject(t *testing.T) {
	// A filter with every field set selects exactly the subject with the
	// same values, so both must render identically.
	tests := []struct {
		name string
		s    Subject
		f    Filter
	}{
		{name: "named group", s: deployment, f: Filter{Prefix: "kube", Cluster: "prod", Group: "apps", Version: "v1",
			Resource: "deployments", Namespace: "default", Name: "web", Type: Modified}},
		{
			name: "core and cluster-scoped",
			s:    Subject{Prefix: "kube", Cluster: "prod", Version: "v1", Resource: "nodes", Name: "n1", Type: Added},
			f: Filter{Prefix: "kube", Cluster: "prod", CoreGroup: true, Version: "v1",
				Resource: "nodes", ClusterScoped: true, Name: "n1", Type: Added},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := tt.f.String(), tt.s.String(); got != want {
				t.Errorf("Filter.String(): got %q, want %q", got, want)
			}
		})
	}
}

func TestFilterValidate(t *testing.T) {
	tests := []struct {
		name   string
		in     Filter
		wantIs []error
	}{
		{name: "missing prefix", in: Filter{}, wantIs: []error{ErrInvalidPrefix}},
		{name: "bad type", in: Filter{Prefix: "kube", Type: "bookmark"}, wantIs: []error{ErrInvalidType}},
		{name: "core group and group", in: Filter{Prefix: "kube", CoreGroup: true, Group: "apps"}, wantIs: []error{ErrInvalidFilter}},
		{name: "cluster-scoped and namespace", in: Filter{Prefix: "kube", ClusterScoped: true, Namespace: "x"}, wantIs: []error{ErrInvalidFilter}},
		{name: "all problems reported", in: Filter{Type: "x", CoreGroup: true, Group: "apps"},
			wantIs: []error{ErrInvalidPrefix, ErrInvalidType, ErrInvalidFilter}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.Validate()
			if err == nil {
				t.Fatalf("Validate(): got nil, want an error")
			}
			for _, want := range tt.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("Validate(): got %v, want an error wrapping %v", err, want)
				}
			}
		})
	}
}

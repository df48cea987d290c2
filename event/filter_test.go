package event

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestFilterString(t *testing.T) {
	tests := []struct {
		name string
		in   Filter
		want string
	}{
		{name: "everything", in: Filter{Prefix: "kube", AnyGroup: true}, want: "kube.*.*.*.*.*.*.*"},
		{name: "the zero group is the core group", in: Filter{Prefix: "kube"}, want: "kube.*.core.*.*.*.*.*"},
		{
			name: "deleted deployments of one cluster",
			in:   Filter{Prefix: "kube", Cluster: "prod", Group: "apps", Resource: "deployments", Type: Deleted},
			want: "kube.prod.apps.*.deployments.*.*.deleted",
		},
		{name: "core group's pods", in: Filter{Prefix: "kube", Resource: "pods"}, want: "kube.*.core.*.pods.*.*.*"},
		{name: "pods of any group", in: Filter{Prefix: "kube", AnyGroup: true, Resource: "pods"}, want: "kube.*.*.*.pods.*.*.*"},
		{name: "core group by the deprecated flag", in: Filter{Prefix: "kube", CoreGroup: true, Resource: "pods"}, want: "kube.*.core.*.pods.*.*.*"},
		{name: "cluster-scoped", in: Filter{Prefix: "kube", AnyGroup: true, ClusterScoped: true}, want: "kube.*.*.*.*._.*.*"},
		{name: "namespace literally underscore", in: Filter{Prefix: "kube", AnyGroup: true, Namespace: "_"}, want: "kube.*.*.*.*.~5F.*.*"},
		{name: "values cannot inject wildcards", in: Filter{Prefix: "kube", AnyGroup: true, Name: "*", Namespace: ">"}, want: "kube.*.*.*.*.~3E.~2A.*"},
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
			f: Filter{Prefix: "kube", Cluster: "prod", Version: "v1",
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
		{name: "any group and group", in: Filter{Prefix: "kube", AnyGroup: true, Group: "apps"}, wantIs: []error{ErrInvalidFilter}},
		{name: "any group and core group", in: Filter{Prefix: "kube", AnyGroup: true, CoreGroup: true}, wantIs: []error{ErrInvalidFilter}},
		{name: "group core", in: Filter{Prefix: "kube", Group: "core", Resource: "pods"}, wantIs: []error{ErrInvalidFilter}},
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

func TestFilterRefusesGroupCoreSayingHowToSelectIt(t *testing.T) {
	err := Filter{Prefix: "kube", Group: "core", Resource: "pods"}.Validate()
	if !errors.Is(err, ErrInvalidFilter) {
		t.Fatalf("Validate(): got %v, want an error wrapping %v", err, ErrInvalidFilter)
	}
	for _, want := range []string{`filter group "core"`, `Group ""`, `schema.GroupResource{Resource: "pods"}`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(): got %q, want it to contain %q", err, want)
		}
	}
}

// FuzzSelectionsSelectTheirObject checks that the selections read a group as the names of an
// object do: a Filter and a MirrorFilter built from an object's group (Group "" being the
// core group) and resource select that object's subject and mirror key, unless they refuse
// the group "core" (or, for MirrorFilter, an empty resource or the namespace "_").
func FuzzSelectionsSelectTheirObject(f *testing.F) {
	long := strings.Repeat("g", MaxTokenLen+1)
	for _, s := range [][3]string{
		{"", "pods", "default"}, {"core", "things", "ns"}, {"apps", "deployments", ""}, {"events.k8s.io", "events", "_"},
		{"*", ">", "a.b"}, {long, "r", long},
	} {
		f.Add(s[0], s[1], s[2], "name")
	}
	f.Fuzz(func(t *testing.T, group, resource, namespace, name string) {
		filter := Filter{Prefix: "kube", Cluster: "prod", Group: group, Resource: resource, Namespace: namespace}
		subject := Subject{Prefix: "kube", Cluster: "prod", Group: group, Version: "v1", Resource: resource,
			Namespace: namespace, Name: name, Type: Added}.String()
		switch err := filter.Validate(); {
		case group == CoreGroupToken:
			if !errors.Is(err, ErrInvalidFilter) {
				t.Fatalf("Filter with group %q: Validate got %v, want an error wrapping %v", group, err, ErrInvalidFilter)
			}
		case err != nil:
			t.Fatalf("Filter with group %q: Validate got %v, want nil", group, err)
		case !selects(filter.String(), subject):
			t.Fatalf("Filter %q does not select the subject %q of its group and resource", filter.String(), subject)
		}

		gr := schema.GroupResource{Group: group, Resource: resource}
		keys, err := MirrorFilter("prod", gr, namespace)
		refused := group == CoreGroupToken || resource == "" || namespace == ClusterScopedToken
		switch {
		case refused && !errors.Is(err, ErrInvalidFilter):
			t.Fatalf("MirrorFilter(%q, %q): got %q, %v, want an error wrapping %v", gr, namespace, keys, err, ErrInvalidFilter)
		case refused:
		case err != nil:
			t.Fatalf("MirrorFilter(%q, %q): got %v, want nil", gr, namespace, err)
		case !selects(keys, MirrorKey("prod", gr, namespace, name)):
			t.Fatalf("MirrorFilter %q does not select the key %q of its group and resource", keys, MirrorKey("prod", gr, namespace, name))
		}
	})
}

// selects reports whether a filter whose wildcards are all "*" matches subject (or key).
func selects(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	if len(ft) != len(st) {
		return false
	}
	for i := range ft {
		if ft[i] != "*" && ft[i] != st[i] {
			return false
		}
	}
	return true
}

package consumer_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestResourceFilter(t *testing.T) {
	tests := []struct {
		name    string
		cluster string
		gr      schema.GroupResource
		narrow  func(*event.Filter)
		want    string
	}{
		{name: "core group", cluster: "prod", gr: schema.GroupResource{Resource: "configmaps"}, want: "kube.prod.core.*.configmaps.*.*.*"},
		{name: "named group, every cluster", gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, want: "kube.*.apps.*.deployments.*.*.*"},
		{name: "dotted group", cluster: "prod", gr: schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, want: "kube.prod.networking~2Ek8s~2Eio.*.ingresses.*.*.*"},
		{
			name: "narrowed to one object's deletes", cluster: "prod", gr: schema.GroupResource{Resource: "configmaps"},
			narrow: func(f *event.Filter) { f.Namespace, f.Name, f.Type = "kube-system", "kube-root-ca.crt", event.Deleted },
			want:   "kube.prod.core.*.configmaps.kube-system.kube-root-ca~2Ecrt.deleted",
		},
		{
			name: "narrowed to cluster-scoped objects", cluster: "prod", gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			narrow: func(f *event.Filter) { f.ClusterScoped = true },
			want:   "kube.prod.rbac~2Eauthorization~2Ek8s~2Eio.*.clusterroles._.*.*",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := consumer.ResourceFilter("kube", tt.cluster, tt.gr)
			if tt.narrow != nil {
				tt.narrow(&f)
			}
			got, err := consumer.Subjects(f)
			if err != nil {
				t.Fatalf("Subjects: got error %v, want nil", err)
			}
			if !slices.Equal(got, []string{tt.want}) {
				t.Errorf("Subjects: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubjectsReportsEveryInvalidFilter(t *testing.T) {
	good := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "pods"})
	noPrefix := good
	noPrefix.Prefix = ""
	badType := good
	badType.Type = "created"
	_, err := consumer.Subjects(good, noPrefix, badType)
	if !errors.Is(err, event.ErrInvalidPrefix) || !errors.Is(err, event.ErrInvalidType) {
		t.Errorf("Subjects: got error %v, want one wrapping ErrInvalidPrefix and ErrInvalidType", err)
	}
	got, err := consumer.Subjects()
	if err != nil || len(got) != 0 {
		t.Errorf("Subjects(): got %q, %v, want none, nil", got, err)
	}
}

func TestSubjectsLeavesOutRepeatsAndSubsetsAndRefusesOverlaps(t *testing.T) {
	pods := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "pods"})
	podDeletes := pods
	podDeletes.Type = event.Deleted
	payments := event.Filter{Prefix: "kube", Cluster: "prod", AnyGroup: true, Namespace: "payments"}
	anyCluster := consumer.ResourceFilter("kube", "", schema.GroupResource{Resource: "pods"})
	secrets := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "secrets"})
	otherPrefix := pods
	otherPrefix.Prefix = "acme.kube"
	tests := []struct {
		name    string
		filters []event.Filter
		want    []string
		overlap bool
	}{
		{name: "disjoint filters stay, in order", filters: []event.Filter{secrets, pods}, want: []string{secrets.String(), pods.String()}},
		{name: "a repeat is left out", filters: []event.Filter{pods, secrets, pods}, want: []string{pods.String(), secrets.String()}},
		{name: "a subset before its superset is left out", filters: []event.Filter{podDeletes, pods}, want: []string{pods.String()}},
		{name: "a subset after its superset is left out", filters: []event.Filter{anyCluster, pods, podDeletes}, want: []string{anyCluster.String()}},
		{name: "other prefixes never overlap", filters: []event.Filter{pods, otherPrefix}, want: []string{pods.String(), otherPrefix.String()}},
		{name: "overlap without a subset", filters: []event.Filter{pods, payments}, overlap: true},
		{name: "overlap after a subset is left out", filters: []event.Filter{podDeletes, pods, payments}, overlap: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := consumer.Subjects(tt.filters...)
			if tt.overlap {
				if !errors.Is(err, consumer.ErrOverlappingFilters) {
					t.Fatalf("Subjects: got %q, %v, want ErrOverlappingFilters", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Subjects: got error %v, want nil", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Subjects: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubjectsAcross(t *testing.T) {
	cms := consumer.ResourceFilter("kube", "", schema.GroupResource{Resource: "configmaps"})
	deletes := event.Filter{Prefix: "kube", AnyGroup: true, Type: event.Deleted}
	pinned := consumer.ResourceFilter("kube", "prod", schema.GroupResource{Resource: "configmaps"})
	tests := []struct {
		name     string
		clusters []string
		filters  []event.Filter
		want     []string
		err      error
	}{
		{name: "one filter, two clusters", clusters: []string{"east", "west"}, filters: []event.Filter{cms}, want: []string{
			"kube.east.core.*.configmaps.*.*.*", "kube.west.core.*.configmaps.*.*.*",
		}},
		{name: "a cluster twice", clusters: []string{"east", "east"}, filters: []event.Filter{cms}, want: []string{"kube.east.core.*.configmaps.*.*.*"}},
		{name: "two filters, in order", clusters: []string{"east"}, filters: []event.Filter{cms, {Prefix: "kube", Resource: "secrets"}}, want: []string{
			"kube.east.core.*.configmaps.*.*.*", "kube.east.core.*.secrets.*.*.*",
		}},
		{name: "overlapping filters", clusters: []string{"east"}, filters: []event.Filter{cms, deletes}, err: consumer.ErrOverlappingFilters},
		{name: "no clusters", filters: []event.Filter{cms}, err: event.ErrInvalidFilter},
		{name: "no filters", clusters: []string{"east"}, err: event.ErrInvalidFilter},
		{name: "a filter naming a cluster", clusters: []string{"east"}, filters: []event.Filter{pinned}, err: event.ErrInvalidFilter},
		{name: "an invalid cluster", clusters: []string{"east", "West.1"}, filters: []event.Filter{cms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := consumer.SubjectsAcross(tt.clusters, tt.filters...)
			if tt.want == nil {
				if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) {
					t.Fatalf("SubjectsAcross: got %q, %v, want an error wrapping %v", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SubjectsAcross: got error %v, want nil", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("SubjectsAcross: got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestOneCoreGroupConvention checks that event.Filter, ResourceFilter, event.MirrorFilter and
// event.MirrorKey read a group the same way, as Kubernetes does (Group "" is the core group),
// so that one schema.GroupResource selects the same resource in the stream and in the mirror,
// and that each of the selections refuses the group "core", saying how to select the core
// group.
func TestOneCoreGroupConvention(t *testing.T) {
	tests := []struct {
		name     string
		gr       schema.GroupResource
		subject  string // the subject filter every selection writes, in cluster prod
		mirror   string // the key filter
		otherKey string // a mirror key of the same resource name in another group
	}{
		{name: "core group", gr: schema.GroupResource{Resource: "events"},
			subject: "kube.prod.core.*.events.*.*.*", mirror: "prod.core.events.*.*",
			otherKey: event.MirrorKey("prod", schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "ns", "a")},
		{name: "named group", gr: schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
			subject: "kube.prod.events~2Ek8s~2Eio.*.events.*.*.*", mirror: "prod.events=2Ek8s=2Eio.events.*.*",
			otherKey: event.MirrorKey("prod", schema.GroupResource{Resource: "events"}, "ns", "a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			literal := event.Filter{Prefix: "kube", Cluster: "prod", Group: tt.gr.Group, Resource: tt.gr.Resource}
			fromGR := consumer.ResourceFilter("kube", "prod", tt.gr)
			for _, f := range []event.Filter{literal, fromGR} {
				got, err := consumer.Subjects(f)
				if err != nil || !slices.Equal(got, []string{tt.subject}) {
					t.Errorf("Subjects(%+v): got %q, %v, want %q", f, got, err, tt.subject)
				}
			}
			subject := event.Subject{Prefix: "kube", Cluster: "prod", Group: tt.gr.Group, Version: "v1",
				Resource: tt.gr.Resource, Namespace: "ns", Name: "a", Type: event.Added}.String()
			if !matches(tt.subject, subject) {
				t.Errorf("filter %q does not select the resource's subject %q", tt.subject, subject)
			}
			mirror, err := event.MirrorFilter("prod", tt.gr, "")
			if err != nil || mirror != tt.mirror {
				t.Fatalf("MirrorFilter: got %q, %v, want %q", mirror, err, tt.mirror)
			}
			if key := event.MirrorKey("prod", tt.gr, "ns", "a"); !matches(mirror, key) {
				t.Errorf("mirror filter %q does not select the resource's key %q", mirror, key)
			}
			if matches(mirror, tt.otherKey) {
				t.Errorf("mirror filter %q selects %q, a key of another group", mirror, tt.otherKey)
			}
		})
	}

	core := schema.GroupResource{Group: "core", Resource: "configmaps"}
	refusals := map[string]error{
		"event.Filter.Validate": event.Filter{Prefix: "kube", Group: core.Group, Resource: core.Resource}.Validate(),
	}
	_, refusals["Subjects(ResourceFilter)"] = consumer.Subjects(consumer.ResourceFilter("kube", "prod", core))
	_, refusals["event.MirrorFilter"] = event.MirrorFilter("prod", core, "")
	for name, err := range refusals {
		if !errors.Is(err, event.ErrInvalidFilter) || !strings.Contains(err.Error(), `group "core"`) || !strings.Contains(err.Error(), `Group ""`) {
			t.Errorf("%s of group %q: got %v, want an error wrapping %v that names the value and says the core group is Group \"\"",
				name, core.Group, err, event.ErrInvalidFilter)
		}
	}
}

// matches reports whether the NATS filter selects subject: both split on ".", "*" matching
// any one token (the filters here have no ">").
func matches(filter, subject string) bool {
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

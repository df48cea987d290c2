package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// ResourceFilter returns the filter that selects every event of one resource, in any version
// (the version is whatever the relay's operator configured, and can change), of cluster
// ("" selects every cluster), under prefix. An empty gr.Group selects the core group, as it
// does in a GroupResource and in an event.Filter; gr.Group "core" is refused by Subjects
// (event.Filter.Validate), with a message saying the core group is Group "". Narrow the
// result by setting Namespace, ClusterScoped, Name or Type.
func ResourceFilter(prefix, cluster string, gr schema.GroupResource) event.Filter {
	return event.Filter{
		Prefix:   prefix,
		Cluster:  cluster,
		Group:    gr.Group,
		Resource: gr.Resource,
	}
}

// Subjects validates filters and returns their subjects, in order, for Durable or a
// jetstream consumer configuration. It reports every invalid filter at once.
//
// A JetStream consumer refuses filters that overlap (a subject two of them select), so
// Subjects leaves out a filter that repeats another or selects a subset of what another
// selects (the events selected stay the same), and fails with ErrOverlappingFilters for two
// filters that select some of the same events but neither all of the other's, such as
// "every Pod" and "everything in namespace payments": write them as filters that do not
// overlap.
func Subjects(filters ...event.Filter) ([]string, error) {
	subjects := make([]string, len(filters))
	var errs []error
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("filter %d: %w", i, err))
			continue
		}
		subjects[i] = f.String()
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return disjoint(subjects)
}

// SubjectsAcross returns the subjects of filters, each applied to every cluster in clusters,
// for a consumer of an aggregate stream (see Aggregate) that wants the events of some of the
// clusters it holds: filter i for cluster j, in that order, repeats and subsets left out as
// Subjects does. The filters leave Cluster empty: a filter that names a cluster is refused,
// as is an empty list of clusters (it would select nothing, while no filter at all selects
// every event) and an invalid cluster name. For every cluster of the stream, leave Cluster
// empty and use Subjects.
func SubjectsAcross(clusters []string, filters ...event.Filter) ([]string, error) {
	var errs []error
	if len(clusters) == 0 {
		errs = append(errs, fmt.Errorf("no clusters: %w", event.ErrInvalidFilter))
	}
	if len(filters) == 0 {
		errs = append(errs, fmt.Errorf("no filters: %w", event.ErrInvalidFilter))
	}
	for _, c := range clusters {
		if err := validateCluster(c); err != nil {
			errs = append(errs, err)
		}
	}
	for i, f := range filters {
		if f.Cluster != "" {
			errs = append(errs, fmt.Errorf("filter %d names cluster %q: leave it empty, the clusters are %q: %w",
				i, f.Cluster, clusters, event.ErrInvalidFilter))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	across := make([]event.Filter, 0, len(filters)*len(clusters))
	for _, f := range filters {
		for _, c := range clusters {
			f.Cluster = c
			across = append(across, f)
		}
	}
	return Subjects(across...)
}

// disjoint returns subjects without the ones equal to or contained in another (of equal
// ones, the first stays), keeping the order of the rest, or ErrOverlappingFilters naming two
// of the rest that overlap.
func disjoint(subjects []string) ([]string, error) {
	var kept []string
	for i, s := range subjects {
		contained := slices.ContainsFunc(subjects[:i], func(o string) bool { return subjectContains(o, s) }) ||
			slices.ContainsFunc(subjects[i+1:], func(o string) bool { return o != s && subjectContains(o, s) })
		if !contained {
			kept = append(kept, s)
		}
	}
	var errs []error
	for i, s := range kept {
		for _, o := range kept[i+1:] {
			if subjectsCollide(s, o) {
				errs = append(errs, fmt.Errorf("filters %s and %s: %w", s, o, ErrOverlappingFilters))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return kept, nil
}

// subjectsCollide reports whether some subject matches both filters. Filters built by
// event.Filter have a verbatim prefix without wildcards and seven tokens (nine for derived
// events), each literal or "*", so they collide exactly when they have as many tokens and agree at every position
// where both are literal.
func subjectsCollide(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	if len(at) != len(bt) {
		return false
	}
	for i := range at {
		if at[i] != bt[i] && at[i] != "*" && bt[i] != "*" {
			return false
		}
	}
	return true
}

// subjectContains reports whether filter outer matches every subject filter inner matches,
// for filters of the shape subjectsCollide describes.
func subjectContains(outer, inner string) bool {
	ot, it := strings.Split(outer, "."), strings.Split(inner, ".")
	if len(ot) != len(it) {
		return false
	}
	for i := range ot {
		if ot[i] != it[i] && ot[i] != "*" {
			return false
		}
	}
	return true
}

// validateCluster checks a cluster name the way the relay checks RELAY_CLUSTER.
func validateCluster(c string) error {
	if !event.ValidCluster(c) {
		return fmt.Errorf("cluster %q: want 1-%d lower-case letters, digits or '-'", c, event.MaxClusterLen)
	}
	return nil
}

package consumer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Token positions after the prefix of an event subject:
// <prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>.<type>.
const (
	namespaceToken = 4
	nameToken      = 5
)

// metaFilters is the stream metadata key of a group's filters, their subjects joined by
// spaces ("" for none), so that EnsurePartitioned can check an existing group.
const metaFilters = "io.kube-nats-relay.filters"

// validateFilters reports the problems of the group's filters: each must be valid, of the
// group's prefix (or none), and select whole objects: no Name (one object is not shared out)
// and no Type (an object's events would be split between filters, and so between
// partitions).
func (c PartitionConfig) validateFilters() error {
	var errs []error
	for i, f := range c.Filters {
		if f.Prefix != "" && f.Prefix != c.prefix() {
			errs = append(errs, fmt.Errorf("filter %d: prefix %q, want the group's %q", i, f.Prefix, c.prefix()))
		}
		f.Prefix = c.prefix()
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("filter %d: %w", i, err))
		}
		if f.Name != "" || f.Type != "" {
			errs = append(errs, fmt.Errorf("filter %d: name %q, type %q: want both empty: a group shares whole objects out", i, f.Name, f.Type))
		}
	}
	return errors.Join(errs...)
}

// transforms returns the subject transforms of the group's source: one over every event
// without filters (transform), one per filter otherwise.
func (c PartitionConfig) transforms() []jetstream.SubjectTransformConfig {
	if len(c.Filters) == 0 {
		return []jetstream.SubjectTransformConfig{c.transform()}
	}
	out := make([]jetstream.SubjectTransformConfig, 0, len(c.Filters))
	for _, f := range c.Filters {
		out = append(out, c.filterTransform(f))
	}
	return out
}

// filterTransform returns the transform of one filter: its subject with the type token
// widened to ">" (so that derived events, one token longer, come too) as the source, and the
// same subject, each wildcard written back, behind the partition of the namespace and name
// wildcards (those of them the filter leaves open: a filter of one namespace partitions by
// name) as the destination.
func (c PartitionConfig) filterTransform(f event.Filter) jetstream.SubjectTransformConfig {
	f.Prefix = c.prefix()
	toks := strings.Split(strings.TrimPrefix(f.String(), c.prefix()+"."), ".")
	toks = toks[:len(toks)-1] // the type: ">" below
	var hashed []string
	dest := make([]string, len(toks))
	n := 0
	for i, tok := range toks {
		dest[i] = tok
		if tok != "*" {
			continue
		}
		n++
		dest[i] = fmt.Sprintf("{{wildcard(%d)}}", n)
		if i == namespaceToken || i == nameToken {
			hashed = append(hashed, fmt.Sprint(n))
		}
	}
	source := c.prefix() + "." + strings.Join(toks, ".") + ".>"
	part := fmt.Sprintf("{{partition(%d,%s)}}", c.Partitions, strings.Join(hashed, ","))
	return jetstream.SubjectTransformConfig{Source: source, Destination: part + "." + c.prefix() + "." + strings.Join(dest, ".") + ".>"}
}

// filterSubjects returns the group's filters as recorded in its stream's metadata: the
// sources of their transforms, "" without filters.
func (c PartitionConfig) filterSubjects() string {
	if len(c.Filters) == 0 {
		return ""
	}
	subjects := make([]string, 0, len(c.Filters))
	for _, t := range c.transforms() {
		subjects = append(subjects, t.Source)
	}
	return strings.Join(subjects, " ")
}

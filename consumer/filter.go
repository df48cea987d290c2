package consumer

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// ResourceFilter returns the filter that selects every event of one resource, in any version
// (the version is whatever the relay's operator configured, and can change), of cluster
// ("" selects every cluster), under prefix. An empty gr.Group selects the core group, as it
// does in a GroupResource; in an event.Filter literal it would select every group. Narrow
// the result by setting Namespace, ClusterScoped, Name or Type.
func ResourceFilter(prefix, cluster string, gr schema.GroupResource) event.Filter {
	return event.Filter{
		Prefix:    prefix,
		Cluster:   cluster,
		Group:     gr.Group,
		CoreGroup: gr.Group == "",
		Resource:  gr.Resource,
	}
}

// Subjects validates filters and returns their subjects, in order, for Durable or a
// jetstream consumer configuration. It reports every invalid filter at once.
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
	return subjects, nil
}

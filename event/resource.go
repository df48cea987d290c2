package event

import "k8s.io/apimachinery/pkg/runtime/schema"

// Resource is an API resource resolved against the server: what a relay source watches and
// what a filter rule is compiled for. Kind and Namespaced are empty until resolved (a rule
// checked before the relay connects knows only the group, version and resource).
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// String writes the resource as kubectl does: resource.version.group, or resource.version
// for the core group (leaving out a version not yet known).
func (r Resource) String() string {
	s := r.Resource
	for _, part := range []string{r.Version, r.Group} {
		if part != "" {
			s += "." + part
		}
	}
	return s
}

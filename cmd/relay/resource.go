package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// kubeVersionRe matches the version names Kubernetes conventionally uses
// (v1, v2beta1, v1alpha3); it is the kubeVersionRegex of
// k8s.io/apimachinery/pkg/version.
var kubeVersionRe = regexp.MustCompile(`^v[0-9]+(?:(?:alpha|beta)[0-9]+)?$`)

// ResourceSpec is one resource to relay, written the way kubectl accepts a
// resource argument: `pods`, `deployments.apps`, `deployments.v1.apps`,
// `widgets.example.com`.
//
// Like kubectl (schema.ParseResourceArg), a spec with three or more
// dot-separated segments has two readings, and only the server knows which
// one is meant: `widgets.example.com` may name version "example" of group
// "com" or group "example.com"; `widgets.v1.example.com` version "v1" of
// "example.com" or group "v1.example.com". GroupVersionResource and
// GroupResource return the two readings, and RESTMapping resolves them in
// kubectl's order. The fields hold the likely reading, for display.
type ResourceSpec struct {
	// Raw is the spec as written.
	Raw string
	// Resource is the plural resource name, e.g. "deployments".
	Resource string
	// Version is the second of three or more segments when it looks like a
	// Kubernetes version (v1, v1beta2); empty otherwise.
	Version string
	// Group is the API group under the likely reading: what follows Version,
	// or, without Version, everything after the first dot. Empty for the core
	// group.
	Group string
}

// ParseResourceSpec parses a kubectl-style resource argument. It rejects empty
// input, whitespace, upper-case letters (kinds such as "Deployment" are not
// accepted: write the plural resource name), subresources and anything that is
// not a valid resource name or API group.
func ParseResourceSpec(s string) (ResourceSpec, error) {
	spec, err := parseResourceSpec(s)
	if err != nil {
		return ResourceSpec{}, fmt.Errorf("parse resource %q: %w", s, err)
	}
	return spec, nil
}

// parseResourceSpec is ParseResourceSpec with errors that do not repeat the
// input, for callers that report the input themselves.
func parseResourceSpec(s string) (ResourceSpec, error) {
	switch {
	case s == "":
		return ResourceSpec{}, errors.New("empty resource")
	case strings.ContainsFunc(s, unicode.IsSpace):
		return ResourceSpec{}, errors.New("must not contain whitespace")
	case strings.ContainsFunc(s, unicode.IsUpper):
		return ResourceSpec{}, errors.New("must be lower case: write the plural resource name as kubectl does (deployments, not Deployment)")
	case strings.Contains(s, "/"):
		return ResourceSpec{}, errors.New("subresources cannot be watched: write resource or resource.group")
	}

	resource, group, _ := strings.Cut(s, ".")
	if resource == "" {
		return ResourceSpec{}, errors.New("missing resource name before the first '.'")
	}
	if len(validation.IsDNS1035Label(resource)) > 0 {
		return ResourceSpec{}, fmt.Errorf("resource name %q must be a DNS-1035 label: at most 63 lower-case letters, digits or '-', starting with a letter", resource)
	}
	if strings.Contains(s, ".") && len(validation.IsDNS1123Subdomain(group)) > 0 {
		return ResourceSpec{}, fmt.Errorf("API group %q must be a DNS subdomain: dot-separated labels of lower-case letters, digits or '-', at most 253 characters", group)
	}

	spec := ResourceSpec{Raw: s, Resource: resource, Group: group}
	if version, rest, ok := strings.Cut(group, "."); ok && kubeVersionRe.MatchString(version) {
		spec.Version, spec.Group = version, rest
	}
	return spec, nil
}

// String returns the spec in the form ParseResourceSpec accepts; for a parsed
// spec it equals Raw.
func (s ResourceSpec) String() string {
	parts := []string{s.Resource}
	if s.Version != "" {
		parts = append(parts, s.Version)
	}
	if s.Group != "" {
		parts = append(parts, s.Group)
	}
	return strings.Join(parts, ".")
}

// GroupResource returns the resource.group reading, where the group is
// everything after the first dot (the core group is "").
func (s ResourceSpec) GroupResource() schema.GroupResource {
	if s.Version == "" {
		return schema.GroupResource{Group: s.Group, Resource: s.Resource}
	}
	return schema.GroupResource{Group: s.Version + "." + s.Group, Resource: s.Resource}
}

// GroupVersionResource returns kubectl's resource.version.group reading and
// true when the spec has three or more segments. kubectl offers that reading
// for any second segment; this returns false when the second segment is not a
// DNS-1035 label, which the apiserver requires of every version name, so the
// reading could never match.
func (s ResourceSpec) GroupVersionResource() (schema.GroupVersionResource, bool) {
	gr := s.GroupResource()
	version, group, ok := strings.Cut(gr.Group, ".")
	if !ok || len(validation.IsDNS1035Label(version)) > 0 {
		return schema.GroupVersionResource{}, false
	}
	return schema.GroupVersionResource{Group: group, Version: version, Resource: s.Resource}, true
}

// RESTMapping resolves the spec the way kubectl resolves a resource argument:
// the resource.version.group reading wins if the server serves that resource
// in that version, otherwise the resource.group reading resolves to the
// group's preferred version. Short names such as "deploy" resolve when mapper
// expands them (restmapper.NewShortcutExpander).
func (s ResourceSpec) RESTMapping(mapper meta.RESTMapper) (*meta.RESTMapping, error) {
	var gvk schema.GroupVersionKind
	if gvr, ok := s.GroupVersionResource(); ok {
		// As in kubectl, a miss here only means the other reading applies;
		// a real discovery failure resurfaces on the lookup below.
		gvk, _ = mapper.KindFor(gvr)
	}
	if gvk.Empty() {
		var err error
		gvk, err = mapper.KindFor(s.GroupResource().WithVersion(""))
		if err != nil {
			return nil, fmt.Errorf("resolve resource %q: %w", s.Raw, err)
		}
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("resolve resource %q: %w", s.Raw, err)
	}
	return mapping, nil
}

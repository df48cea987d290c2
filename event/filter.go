package event

import (
	"errors"
	"fmt"
	"strings"
)

// Filter builds a NATS subscription subject that selects events. Every empty
// field matches any value ("*"); every set field matches exactly that value,
// encoded like Subject does (a value too long for MaxTokenLen in the hashed
// form, see SubjectToken), so a value can never inject a wildcard. Because
// an empty Group or Namespace means "any", the core group and cluster-scoped
// objects are selected with CoreGroup and ClusterScoped.
type Filter struct {
	// Prefix is the subject prefix, written verbatim. Required.
	Prefix string
	// Cluster selects one cluster; "" matches all.
	Cluster string
	// Group selects one API group; "" matches all (see CoreGroup).
	Group string
	// CoreGroup selects the core API group. It excludes Group.
	CoreGroup bool
	// Version selects one API version; "" matches all.
	Version string
	// Resource selects one resource, e.g. "pods"; "" matches all.
	Resource string
	// Namespace selects one namespace; "" matches all (see ClusterScoped).
	Namespace string
	// ClusterScoped selects cluster-scoped objects. It excludes Namespace.
	ClusterScoped bool
	// Name selects one object name; "" matches all.
	Name string
	// Type selects one event type; "" matches all.
	Type Type
}

// String returns the subscription subject, for example
// "kube.*.apps.*.deployments.*.*.deleted". It does not validate: call
// Validate first. If both CoreGroup and Group are set, CoreGroup wins; if
// both ClusterScoped and Namespace are set, ClusterScoped wins.
func (f Filter) String() string {
	group := wildcardOr(f.Group, encodeGroup)
	if f.CoreGroup {
		group = CoreGroupToken
	}
	namespace := wildcardOr(f.Namespace, encodeNamespace)
	if f.ClusterScoped {
		namespace = ClusterScopedToken
	}
	toks := [tokensAfterPrefix]string{
		wildcardOr(f.Cluster, SubjectToken),
		group,
		wildcardOr(f.Version, SubjectToken),
		wildcardOr(f.Resource, SubjectToken),
		namespace,
		wildcardOr(f.Name, SubjectToken),
		wildcardOr(string(f.Type), EncodeToken),
	}
	return f.Prefix + subjectSeparator + strings.Join(toks[:], subjectSeparator)
}

// Validate reports every problem with f: an invalid prefix, an invalid type,
// CoreGroup together with Group, ClusterScoped together with Namespace.
func (f Filter) Validate() error {
	var errs []error
	if err := ValidatePrefix(f.Prefix); err != nil {
		errs = append(errs, err)
	}
	if f.Type != "" && !f.Type.Valid() {
		errs = append(errs, fmt.Errorf("filter type %q: %w", f.Type, ErrInvalidType))
	}
	if f.CoreGroup && f.Group != "" {
		errs = append(errs, fmt.Errorf("filter group %q: set together with CoreGroup: %w", f.Group, ErrInvalidFilter))
	}
	if f.ClusterScoped && f.Namespace != "" {
		errs = append(errs, fmt.Errorf("filter namespace %q: set together with ClusterScoped: %w", f.Namespace, ErrInvalidFilter))
	}
	return errors.Join(errs...)
}

// wildcardOr returns "*" for an empty value and encode(value) otherwise.
func wildcardOr(value string, encode func(string) string) string {
	if value == "" {
		return wildcardToken
	}
	return encode(value)
}

package event

import (
	"errors"
	"fmt"
	"strings"
)

// Filter builds a NATS subscription subject that selects events. The group
// is named as Kubernetes names it, in a schema.GroupResource and in
// Subject.Group: Group "" is the core group, so Filter{Resource: "pods"}
// selects the core group's Pods and never another group's "pods". Every
// group is selected with AnyGroup. Every other empty field matches any value
// ("*"), as an empty namespace means every namespace in Kubernetes;
// cluster-scoped objects are selected with ClusterScoped. A set field matches
// exactly that value, encoded like Subject does (a value too long for
// MaxTokenLen in the hashed form, see SubjectToken), so a value can never
// inject a wildcard. Validate refuses Group "core": "core" is only the
// subject token of the core group.
type Filter struct {
	// Prefix is the subject prefix, written verbatim. Required.
	Prefix string
	// Cluster selects one cluster; "" matches all.
	Cluster string
	// Group selects one API group; "" is the core group, as in a
	// schema.GroupResource. It is ignored when AnyGroup is set.
	Group string
	// AnyGroup selects every API group. It excludes Group and CoreGroup.
	AnyGroup bool
	// CoreGroup selects the core API group, as Group "" does. It excludes
	// Group.
	//
	// Deprecated: leave Group empty; the core group is Group "".
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
	// Type selects one event type; "" matches all. For derived events it is the type of
	// the change they derive from.
	Type Type
	// Derived selects derived events instead of ordinary ones: "" selects only ordinary
	// events, AllDerived every derived event, and a name the derived events of that name.
	Derived string
}

// AllDerived is the Filter.Derived value that selects every derived event.
const AllDerived = wildcardToken

// String returns the subscription subject, for example
// "kube.*.apps.*.deployments.*.*.deleted". It does not validate: call
// Validate first. If AnyGroup is set the group is "*"; otherwise, if both
// CoreGroup and Group are set, CoreGroup wins; if both ClusterScoped and
// Namespace are set, ClusterScoped wins. A Group "core" (which Validate
// refuses) is written as the token of a group literally named "core".
func (f Filter) String() string {
	group := encodeGroup(f.Group)
	switch {
	case f.AnyGroup:
		group = wildcardToken
	case f.CoreGroup:
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
	subject := f.Prefix + subjectSeparator + strings.Join(toks[:], subjectSeparator)
	if f.Derived != "" {
		name := wildcardToken
		if f.Derived != AllDerived {
			name = EncodeToken(f.Derived)
		}
		subject += subjectSeparator + DerivedToken + subjectSeparator + name
	}
	return subject
}

// Validate reports every problem with f: an invalid prefix, an invalid type,
// Group "core" (see checkGroup), AnyGroup together with Group or CoreGroup,
// CoreGroup together with Group, ClusterScoped together with Namespace.
func (f Filter) Validate() error {
	var errs []error
	if err := ValidatePrefix(f.Prefix); err != nil {
		errs = append(errs, err)
	}
	if f.Type != "" && !f.Type.Valid() {
		errs = append(errs, fmt.Errorf("filter type %q: %w", f.Type, ErrInvalidType))
	}
	if err := checkGroup(f.Group); err != nil {
		errs = append(errs, fmt.Errorf("filter %w", err))
	}
	if f.Derived != "" && f.Derived != AllDerived {
		if err := ValidateDerivedName(f.Derived); err != nil {
			errs = append(errs, fmt.Errorf("filter: %w", err))
		}
	}
	if f.AnyGroup && (f.Group != "" || f.CoreGroup) {
		errs = append(errs, fmt.Errorf("filter group %q, core group %t: set together with AnyGroup: %w",
			f.Group, f.CoreGroup, ErrInvalidFilter))
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

// checkGroup refuses the group "core" in a selection (Filter, MirrorFilter,
// consumer.ResourceFilter): "core" is only how subjects and mirror keys write
// the core group, whose name is "" in Kubernetes, and a group literally named
// "core" cannot be a CustomResourceDefinition's (its group needs a dot). The
// error wraps ErrInvalidFilter and says how to select the core group.
func checkGroup(group string) error {
	if group == CoreGroupToken {
		return fmt.Errorf("group %q: the core group is Group \"\" (schema.GroupResource{Resource: \"pods\"}); %q is only its token in subjects and keys: %w",
			group, CoreGroupToken, ErrInvalidFilter)
	}
	return nil
}

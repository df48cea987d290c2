package event

import (
	"errors"
	"fmt"
	"strings"
)

const (
	// CoreGroupToken is the group token of the core API group (Group "").
	// A group literally named "core" is written coreGroupLiteral.
	CoreGroupToken = "core"
	// ClusterScopedToken is the namespace token of a cluster-scoped object
	// (Namespace ""). A namespace literally named "_" is written
	// clusterScopedLiteral.
	ClusterScopedToken = "_"

	// coreGroupLiteral is the token of a group literally named "core": the
	// placeholder with its first byte escaped. DecodeToken rejects it as
	// non-canonical, so it cannot collide with any other value.
	coreGroupLiteral = "~63ore"
	// clusterScopedLiteral is the token of a namespace literally named "_".
	clusterScopedLiteral = "~5F"

	// subjectSeparator separates subject tokens.
	subjectSeparator = "."
	// wildcardToken matches exactly one token in a NATS subscription.
	wildcardToken = "*"
	// tailWildcardToken matches one or more trailing tokens.
	tailWildcardToken = ">"
	// systemPrefixByte starts the subjects NATS reserves for itself ($JS,
	// $KV, $SYS, ...); a prefix must not start with it.
	systemPrefixByte = '$'
	// tokensAfterPrefix is the number of tokens after the prefix: cluster,
	// group, version, resource, namespace, name and type.
	tokensAfterPrefix = 7
)

// Subject is the parsed form of an event subject
// <prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>.<type>.
// Field values are the plain Kubernetes values; String and ParseSubject
// apply the token encoding.
type Subject struct {
	// Prefix is one or more dot-separated tokens, written verbatim. It must
	// satisfy ValidatePrefix.
	Prefix string
	// Cluster names the Kubernetes cluster the relay watches.
	Cluster string
	// Group is the API group, "" for the core group (written "core").
	Group string
	// Version is the API version of the resource, e.g. "v1".
	Version string
	// Resource is the plural lower-case resource name, e.g. "deployments".
	Resource string
	// Namespace is the object's namespace, "" for cluster-scoped objects
	// (written "_").
	Namespace string
	// Name is the object's name.
	Name string
	// Type is the kind of change.
	Type Type
}

// String returns the subject. It does not validate: call Validate before
// publishing. For every s with a valid prefix and type,
// ParseSubject(s.Prefix, s.String()) returns s.
func (s Subject) String() string {
	toks := [tokensAfterPrefix]string{
		EncodeToken(s.Cluster),
		encodeGroup(s.Group),
		EncodeToken(s.Version),
		EncodeToken(s.Resource),
		encodeNamespace(s.Namespace),
		EncodeToken(s.Name),
		EncodeToken(string(s.Type)),
	}
	return s.Prefix + subjectSeparator + strings.Join(toks[:], subjectSeparator)
}

// Validate reports every reason s cannot be published: an invalid prefix, an
// invalid type, or an empty cluster, version, resource or name. Group and
// Namespace may be empty.
func (s Subject) Validate() error {
	var errs []error
	if err := ValidatePrefix(s.Prefix); err != nil {
		errs = append(errs, err)
	}
	if !s.Type.Valid() {
		errs = append(errs, fmt.Errorf("subject type %q: %w", s.Type, ErrInvalidType))
	}
	for _, f := range []struct{ name, value string }{
		{"cluster", s.Cluster},
		{"version", s.Version},
		{"resource", s.Resource},
		{"name", s.Name},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("subject %s: empty: %w", f.name, ErrInvalidSubject))
		}
	}
	return errors.Join(errs...)
}

// ParseSubject parses subject, which must start with prefix followed by
// exactly seven tokens. It accepts only what Subject.String writes: every
// token must be canonical, the group token "~" and the namespace token "~"
// are rejected (the empty values are written "core" and "_"), and the type
// must be valid. Errors wrap ErrInvalidSubject, and also ErrInvalidPrefix,
// ErrInvalidToken or ErrInvalidType when that is the cause.
func ParseSubject(prefix, subject string) (Subject, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Subject{}, fmt.Errorf("parse subject %q: %w: %w", subject, ErrInvalidSubject, err)
	}
	rest, ok := strings.CutPrefix(subject, prefix+subjectSeparator)
	if !ok {
		return Subject{}, fmt.Errorf("parse subject %q: want prefix %q: %w", subject, prefix, ErrInvalidSubject)
	}
	toks := strings.Split(rest, subjectSeparator)
	if len(toks) != tokensAfterPrefix {
		return Subject{}, fmt.Errorf("parse subject %q: got %d tokens after prefix, want %d: %w",
			subject, len(toks), tokensAfterPrefix, ErrInvalidSubject)
	}
	s := Subject{Prefix: prefix}
	// The type token is last and handled after the loop.
	fields := [tokensAfterPrefix - 1]struct {
		name   string
		dst    *string
		decode func(string) (string, error)
	}{
		{"cluster", &s.Cluster, DecodeToken},
		{"group", &s.Group, decodeGroup},
		{"version", &s.Version, DecodeToken},
		{"resource", &s.Resource, DecodeToken},
		{"namespace", &s.Namespace, decodeNamespace},
		{"name", &s.Name, DecodeToken},
	}
	for i, f := range fields {
		v, err := f.decode(toks[i])
		if err != nil {
			return Subject{}, fmt.Errorf("parse subject %q: %w: %s: %w", subject, ErrInvalidSubject, f.name, err)
		}
		*f.dst = v
	}
	t, err := ParseType(toks[tokensAfterPrefix-1])
	if err != nil {
		return Subject{}, fmt.Errorf("parse subject %q: %w: type: %w", subject, ErrInvalidSubject, err)
	}
	s.Type = t
	return s, nil
}

// ValidatePrefix checks a subject prefix: one or more non-empty tokens
// separated by ".", each made only of safe bytes (printable ASCII except
// ".", "*", ">" and "~"), and not starting with "$", which NATS reserves for
// its own subjects. Errors wrap ErrInvalidPrefix.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("validate prefix %q: empty: %w", prefix, ErrInvalidPrefix)
	}
	if prefix[0] == systemPrefixByte {
		return fmt.Errorf("validate prefix %q: starts with %q, reserved by NATS: %w", prefix, systemPrefixByte, ErrInvalidPrefix)
	}
	for i, tok := range strings.Split(prefix, subjectSeparator) {
		if tok == "" {
			return fmt.Errorf("validate prefix %q: token %d is empty: %w", prefix, i, ErrInvalidPrefix)
		}
		for j := 0; j < len(tok); j++ {
			if !safeByte(tok[j]) {
				return fmt.Errorf("validate prefix %q: token %d: byte 0x%02X not allowed: %w", prefix, i, tok[j], ErrInvalidPrefix)
			}
		}
	}
	return nil
}

// StreamSubject returns <prefix>.<cluster>.>, the subject filter of the
// stream that holds every event of one cluster. The cluster is token-encoded;
// the prefix is used verbatim.
func StreamSubject(prefix, cluster string) string {
	return prefix + subjectSeparator + EncodeToken(cluster) + subjectSeparator + tailWildcardToken
}

// encodeGroup returns the group token: "core" for the core group.
func encodeGroup(group string) string {
	return encodeWithPlaceholder(group, CoreGroupToken, coreGroupLiteral)
}

// decodeGroup reverses encodeGroup.
func decodeGroup(tok string) (string, error) {
	return decodeWithPlaceholder(tok, CoreGroupToken, coreGroupLiteral)
}

// encodeNamespace returns the namespace token: "_" for cluster-scoped objects.
func encodeNamespace(namespace string) string {
	return encodeWithPlaceholder(namespace, ClusterScopedToken, clusterScopedLiteral)
}

// decodeNamespace reverses encodeNamespace.
func decodeNamespace(tok string) (string, error) {
	return decodeWithPlaceholder(tok, ClusterScopedToken, clusterScopedLiteral)
}

// encodeWithPlaceholder writes "" as placeholder, the value placeholder as
// literal, and anything else with EncodeToken.
func encodeWithPlaceholder(value, placeholder, literal string) string {
	switch value {
	case "":
		return placeholder
	case placeholder:
		return literal
	}
	return EncodeToken(value)
}

// decodeWithPlaceholder reverses encodeWithPlaceholder. It rejects the
// empty-value token "~", since the empty value is written as placeholder.
func decodeWithPlaceholder(tok, placeholder, literal string) (string, error) {
	switch tok {
	case placeholder:
		return "", nil
	case literal:
		return placeholder, nil
	case emptyToken:
		return "", fmt.Errorf("decode token %q: the empty value is written %q: %w", tok, placeholder, ErrInvalidToken)
	}
	return DecodeToken(tok)
}

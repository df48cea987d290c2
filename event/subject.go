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
	// Derived is the name of a derived event, "" for an ordinary event. A derived event's
	// subject has two more tokens after the type: DerivedToken and the name.
	Derived string
	// Digests is set by ParseSubject for every field whose token was in the hashed form
	// (a value longer than MaxTokenLen once encoded, see SubjectToken). Such a field holds
	// only the readable start of the value; the exact value is in the event's headers.
	// Leave it zero when building a Subject from full values.
	Digests Digests
}

// Digests holds, for each field of a Subject, the digest of a value written in the hashed
// form; "" for a field written in full.
type Digests struct {
	Cluster, Group, Version, Resource, Namespace, Name string
}

// Exact reports whether every field of s holds its full value: no token was in the hashed
// form.
func (s Subject) Exact() bool { return s.Digests == Digests{} }

// String returns the subject. It does not validate: call Validate before
// publishing. For every s with a valid prefix and type,
// ParseSubject(s.Prefix, s.String()) returns s. A field with a digest is written in the
// hashed form, its value as the readable start; any other field is bounded by SubjectToken.
func (s Subject) String() string {
	d := s.Digests
	toks := [tokensAfterPrefix]string{
		fieldToken(s.Cluster, d.Cluster, SubjectToken),
		fieldToken(s.Group, d.Group, encodeGroup),
		fieldToken(s.Version, d.Version, SubjectToken),
		fieldToken(s.Resource, d.Resource, SubjectToken),
		fieldToken(s.Namespace, d.Namespace, encodeNamespace),
		fieldToken(s.Name, d.Name, SubjectToken),
		EncodeToken(string(s.Type)),
	}
	subject := s.Prefix + subjectSeparator + strings.Join(toks[:], subjectSeparator)
	if s.Derived != "" {
		subject += subjectSeparator + DerivedToken + subjectSeparator + EncodeToken(s.Derived)
	}
	return subject
}

// fieldToken writes one field: the hashed form when it has a digest, encode(value) otherwise.
func fieldToken(value, digest string, encode func(string) string) string {
	if digest != "" {
		return hashedToken(value, digest)
	}
	return encode(value)
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
	if s.Derived != "" {
		if err := ValidateDerivedName(s.Derived); err != nil {
			errs = append(errs, fmt.Errorf("subject: %w", err))
		}
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
// exactly seven tokens, or nine for a derived event (the type, DerivedToken and a
// name ValidateDerivedName accepts). It accepts only what Subject.String writes: every
// token must be canonical or in the hashed form (see SubjectToken), the group
// token "~" and the namespace token "~" are rejected (the empty values are
// written "core" and "_"), and the type must be valid. A token in the hashed
// form sets the field to the decoded readable start and its digest in
// Digests: the exact value is in the event's headers (MetaFromHeader).
// Errors wrap ErrInvalidSubject, and also ErrInvalidPrefix, ErrInvalidToken
// or ErrInvalidType when that is the cause.
func ParseSubject(prefix, subject string) (Subject, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Subject{}, fmt.Errorf("parse subject %q: %w: %w", subject, ErrInvalidSubject, err)
	}
	rest, ok := strings.CutPrefix(subject, prefix+subjectSeparator)
	if !ok {
		return Subject{}, fmt.Errorf("parse subject %q: want prefix %q: %w", subject, prefix, ErrInvalidSubject)
	}
	toks := strings.Split(rest, subjectSeparator)
	s := Subject{Prefix: prefix}
	switch {
	case len(toks) == tokensAfterPrefix+2 && toks[tokensAfterPrefix] == DerivedToken:
		name := toks[tokensAfterPrefix+1]
		if err := ValidateDerivedName(name); err != nil {
			return Subject{}, fmt.Errorf("parse subject %q: %w: %w", subject, ErrInvalidSubject, err)
		}
		s.Derived = name
		toks = toks[:tokensAfterPrefix]
	case len(toks) != tokensAfterPrefix:
		return Subject{}, fmt.Errorf("parse subject %q: got %d tokens after prefix, want %d (or %d ending %s.<name>): %w",
			subject, len(toks), tokensAfterPrefix, tokensAfterPrefix+2, DerivedToken, ErrInvalidSubject)
	}
	// The type token is last and handled after the loop.
	fields := [tokensAfterPrefix - 1]struct {
		name   string
		dst    *string
		digest *string
		decode func(string) (string, error)
	}{
		{"cluster", &s.Cluster, &s.Digests.Cluster, DecodeToken},
		{"group", &s.Group, &s.Digests.Group, decodeGroup},
		{"version", &s.Version, &s.Digests.Version, DecodeToken},
		{"resource", &s.Resource, &s.Digests.Resource, DecodeToken},
		{"namespace", &s.Namespace, &s.Digests.Namespace, decodeNamespace},
		{"name", &s.Name, &s.Digests.Name, DecodeToken},
	}
	for i, f := range fields {
		v, digest, err := decodeField(toks[i], f.decode)
		if err != nil {
			return Subject{}, fmt.Errorf("parse subject %q: %w: %s: %w", subject, ErrInvalidSubject, f.name, err)
		}
		*f.dst, *f.digest = v, digest
	}
	t, err := ParseType(toks[tokensAfterPrefix-1])
	if err != nil {
		return Subject{}, fmt.Errorf("parse subject %q: %w: type: %w", subject, ErrInvalidSubject, err)
	}
	s.Type = t
	return s, nil
}

// decodeField decodes one field token: the hashed form gives its readable start and digest;
// any other token must be canonical, its value no longer than SubjectToken writes in full.
func decodeField(tok string, decode func(string) (string, error)) (value, digest string, err error) {
	start, digest, hashed, err := parseHashed(tok, MaxTokenLen, hashMarker)
	switch {
	case err != nil:
		return "", "", err
	case hashed:
		v, err := DecodeToken(start)
		if err != nil {
			return "", "", fmt.Errorf("readable start of hashed token: %w", err)
		}
		return v, digest, nil
	case len(tok) > MaxTokenLen:
		return "", "", fmt.Errorf("token of %d bytes: longer than %d, a value this long is written in the hashed form: %w",
			len(tok), MaxTokenLen, ErrInvalidToken)
	}
	v, err := decode(tok)
	return v, "", err
}

// ValidatePrefix checks a subject prefix: one or more non-empty tokens
// separated by ".", each made only of safe bytes (printable ASCII except
// ".", "*", ">" and "~"), at most MaxPrefixLen bytes in all, and not
// starting with "$", which NATS reserves for its own subjects. Errors wrap
// ErrInvalidPrefix.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("validate prefix %q: empty: %w", prefix, ErrInvalidPrefix)
	}
	if len(prefix) > MaxPrefixLen {
		return fmt.Errorf("validate prefix of %d bytes: longer than %d, which keeps every subject within %d bytes: %w",
			len(prefix), MaxPrefixLen, MaxSubjectLen, ErrInvalidPrefix)
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
// stream that holds every event of one cluster. The cluster is written as
// SubjectToken writes it; the prefix is used verbatim.
func StreamSubject(prefix, cluster string) string {
	return prefix + subjectSeparator + SubjectToken(cluster) + subjectSeparator + tailWildcardToken
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
// literal, and anything else with SubjectToken.
func encodeWithPlaceholder(value, placeholder, literal string) string {
	switch value {
	case "":
		return placeholder
	case placeholder:
		return literal
	}
	return SubjectToken(value)
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

package event

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EncodeKeyToken writes s as one JetStream key-value key token: bytes in [A-Za-z0-9_-]
// stay, every other byte is written =XX (upper-case hex), and the empty string is "=".
// DecodeKeyToken reverses it. The result is not bounded: keys use KeyToken.
func EncodeKeyToken(s string) string {
	if s == "" {
		return "="
	}
	return escapeBytes(s, keyEscapeByte, &keyEscaped)
}

// keyEscaped is the set of bytes EncodeKeyToken escapes: every byte outside [A-Za-z0-9_-].
var keyEscaped = newByteSet(func(c byte) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
})

// DecodeKeyToken reverses EncodeKeyToken. A token in the hashed form (IsHashedKeyToken)
// cannot be reversed: the error wraps ErrInvalidToken.
func DecodeKeyToken(tok string) (string, error) {
	if tok == "=" {
		return "", nil
	}
	if IsHashedKeyToken(tok) {
		return "", fmt.Errorf("decode key token %q: hashed form, the value is not in the key: %w", tok, ErrInvalidToken)
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '=' {
			b.WriteByte(tok[i])
			continue
		}
		if i+2 >= len(tok) {
			return "", fmt.Errorf("decode key token %q: truncated escape: %w", tok, ErrInvalidToken)
		}
		hi, okHi := unhex(tok[i+1])
		lo, okLo := unhex(tok[i+2])
		if !okHi || !okLo {
			return "", fmt.Errorf("decode key token %q: bad escape: %w", tok, ErrInvalidToken)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), nil
}

// MirrorKey is the key of an object in the state mirror bucket:
// <cluster>.<group>.<resource>.<namespace>.<name>, each a key token (KeyToken: a value longer
// than MaxKeyTokenLen once encoded is written in the hashed form, which cannot be decoded).
// gr names the object's group and resource as Kubernetes does: Group "" is the core group,
// written "core", and the namespace of a cluster-scoped object ("") is written "_". A group
// literally named "core" is written "=63ore" and a namespace literally named "_" is written
// "=5F", escapes EncodeKeyToken never writes, so neither collides with the placeholder. The
// key names the object; its exact identity is in the value (the object's metadata). Since it
// names an object rather than selecting some, MirrorKey refuses no group: Group "core" is the
// key of a group literally named "core" (only an aggregated API could be; a custom resource's
// group has a dot), never of the core group.
func MirrorKey(cluster string, gr schema.GroupResource, namespace, name string) string {
	return strings.Join([]string{KeyToken(cluster), mirrorGroupToken(gr.Group), KeyToken(gr.Resource),
		NamespaceKeyToken(namespace), KeyToken(name)}, ".")
}

// mirrorGroupToken is the group's key token: "core" for the core group.
func mirrorGroupToken(group string) string {
	switch group {
	case "":
		return CoreGroupToken
	case CoreGroupToken:
		return "=63ore"
	}
	return KeyToken(group)
}

// NamespaceKeyToken is the key token of a namespace: "_" for a cluster-scoped object
// (namespace ""), "=5F" for a namespace literally named "_", KeyToken otherwise.
func NamespaceKeyToken(namespace string) string {
	switch namespace {
	case "":
		return ClusterScopedToken
	case ClusterScopedToken:
		return clusterScopedKeyLiteral
	}
	return KeyToken(namespace)
}

// clusterScopedKeyLiteral is the key token of a namespace literally named "_".
const clusterScopedKeyLiteral = "=5F"

// MirrorFilter is the key filter over the state mirror that selects every object of one
// resource: gr, named as Kubernetes names it (Group "" is the core group, as in MirrorKey,
// event.Filter and consumer.ResourceFilter), in cluster ("" every cluster, for a bucket that
// aggregates several) and namespace ("" every namespace, and the only choice for a
// cluster-scoped resource). Values are encoded as MirrorKey encodes them, so none can inject
// a wildcard. It refuses, naming the value, Group "core" (the core group is Group ""), an
// empty Resource, and the namespace "_", which no namespace is (a cluster-scoped object's
// key holds "_": leave namespace empty); errors wrap ErrInvalidFilter.
func MirrorFilter(cluster string, gr schema.GroupResource, namespace string) (string, error) {
	var errs []error
	if err := checkGroup(gr.Group); err != nil {
		errs = append(errs, fmt.Errorf("mirror filter %w", err))
	}
	if gr.Resource == "" {
		errs = append(errs, fmt.Errorf("mirror filter resource %q: empty: name the resource, e.g. schema.GroupResource{Resource: \"configmaps\"}: %w",
			gr.Resource, ErrInvalidFilter))
	}
	if namespace == ClusterScopedToken {
		errs = append(errs, fmt.Errorf("mirror filter namespace %q: no namespace has this name, it is the key token of cluster-scoped objects: leave namespace empty: %w",
			namespace, ErrInvalidFilter))
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return strings.Join([]string{wildcardOr(cluster, KeyToken), mirrorGroupToken(gr.Group), KeyToken(gr.Resource),
		wildcardOr(namespace, NamespaceKeyToken), wildcardToken}, "."), nil
}

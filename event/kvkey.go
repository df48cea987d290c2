package event

import (
	"fmt"
	"strings"
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
// than MaxKeyTokenLen once encoded is written in the hashed form, which cannot be decoded),
// the core group written "core" and the namespace of a cluster-scoped object "_". A group
// literally named "core" is written "=63ore" and a namespace literally named "_" is written
// "=5F", escapes EncodeKeyToken never writes, so neither collides with the placeholder. The
// key names the object; its exact identity is in the value (the object's metadata).
func MirrorKey(cluster, group, resource, namespace, name string) string {
	return strings.Join([]string{KeyToken(cluster), mirrorGroupToken(group), KeyToken(resource),
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

// MirrorFilter is a key filter over the state mirror: empty fields match anything. Pass
// CoreGroupToken ("core") as group for the core group, and ClusterScopedToken as namespace
// for cluster-scoped objects only.
func MirrorFilter(cluster, group, resource, namespace string) string {
	tok := func(s string, token func(string) string) string {
		if s == "" {
			return "*"
		}
		return token(s)
	}
	ns := tok(namespace, NamespaceKeyToken)
	if namespace == ClusterScopedToken {
		ns = ClusterScopedToken
	}
	return strings.Join([]string{tok(cluster, KeyToken), tok(group, KeyToken), tok(resource, KeyToken), ns, "*"}, ".")
}

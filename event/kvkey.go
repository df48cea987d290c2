package event

import (
	"fmt"
	"strings"
)

// EncodeKeyToken writes s as one JetStream key-value key token: bytes in [A-Za-z0-9_-]
// stay, every other byte is written =XX (upper-case hex), and the empty string is "=".
// DecodeKeyToken reverses it.
func EncodeKeyToken(s string) string {
	if s == "" {
		return "="
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexUpper[c>>4])
		b.WriteByte(hexUpper[c&15])
	}
	return b.String()
}

const hexUpper = "0123456789ABCDEF"

// DecodeKeyToken reverses EncodeKeyToken.
func DecodeKeyToken(tok string) (string, error) {
	if tok == "=" {
		return "", nil
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
		hi, lo := strings.IndexByte(hexUpper, tok[i+1]), strings.IndexByte(hexUpper, tok[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("decode key token %q: bad escape: %w", tok, ErrInvalidToken)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), nil
}

// MirrorKey is the key of an object in the state mirror bucket:
// <cluster>.<group>.<resource>.<namespace>.<name>, each a key token (EncodeKeyToken), the
// core group written "core" and the namespace of a cluster-scoped object "_".
func MirrorKey(cluster, group, resource, namespace, name string) string {
	if group == "" {
		group = CoreGroupToken
	}
	ns := ClusterScopedToken
	if namespace != "" {
		ns = EncodeKeyToken(namespace)
	}
	return strings.Join([]string{EncodeKeyToken(cluster), EncodeKeyToken(group), EncodeKeyToken(resource), ns, EncodeKeyToken(name)}, ".")
}

// MirrorFilter is a key filter over the state mirror: empty fields match anything. Pass
// ClusterScopedToken as namespace for cluster-scoped objects only.
func MirrorFilter(cluster, group, resource, namespace string) string {
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return EncodeKeyToken(s)
	}
	ns := tok(namespace)
	if namespace == ClusterScopedToken {
		ns = ClusterScopedToken
	}
	return strings.Join([]string{tok(cluster), tok(group), tok(resource), ns, "*"}, ".")
}

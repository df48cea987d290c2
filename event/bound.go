package event

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Length bounds. nats-server closes a client's connection when one protocol line is longer
// than its max_control_line (4096 bytes by default): for a publish with headers that line is
// "HPUB <subject> <reply> <header size> <total size>", so a subject must leave room for the
// reply subject (a JetStream async publish uses "_INBOX.<6>.<6>", 20 bytes; a custom inbox
// prefix makes it longer) and the two sizes. Kubernetes bounds neither names nor namespaces
// for every resource (RBAC names have no length limit), so every token and every key token
// is bounded here, and a longer value is written in the hashed form.
const (
	// MaxControlLine is nats-server's default max_control_line: the longest protocol line a
	// client may send. The bounds below are chosen so that a publish stays under it.
	MaxControlLine = 4096
	// MaxTokenLen is the longest subject token after the prefix. 512 bytes keep every DNS
	// subdomain (253 characters, each "." written as a 3-byte escape: at most 505 bytes)
	// written in full; a longer token is written in the hashed form (see SubjectToken).
	MaxTokenLen = 512
	// MaxPrefixLen is the longest subject prefix ValidatePrefix accepts.
	MaxPrefixLen = 256
	// MaxSubjectLen is the longest subject String writes: the prefix, six bounded tokens,
	// the longest type and, for a derived event, DerivedToken and the longest name, with
	// their separators. It leaves MaxControlLine-MaxSubjectLen-24 bytes (more than 600) of
	// the HPUB line for the reply subject and the two sizes.
	MaxSubjectLen = MaxPrefixLen + (tokensAfterPrefix-1)*(MaxTokenLen+len(subjectSeparator)) +
		len(subjectSeparator) + len(Modified) +
		2*len(subjectSeparator) + len(DerivedToken) + MaxDerivedNameLen
	// MaxKeyTokenLen is the longest key token KeyToken writes; as MaxTokenLen, it keeps every
	// DNS subdomain written in full. A mirror key (five tokens) is at most 2,564 bytes, an
	// index key two tokens after the source.
	MaxKeyTokenLen = 512

	// DigestLen is the length of the digest that ends a hashed token: SHA-256 in lower-case
	// hex. All 256 bits are kept: names are chosen by whoever may create objects, so the
	// digest must resist a deliberate collision, not only an accidental one.
	DigestLen = 2 * sha256.Size
	// digestDomain is hashed before the value, so that a digest of a name cannot be
	// mistaken for a SHA-256 computed for another purpose.
	digestDomain = "kube-nats-relay/token/v1\x00"
	// hashMarker separates the readable start of a hashed subject token from its digest.
	// EncodeToken never writes it: its escape byte is always followed by two upper-case hex
	// digits (or stands alone for the empty value), never by another escape byte.
	hashMarker = "~~"
	// keyHashMarker is hashMarker for key tokens: EncodeKeyToken never writes "==".
	keyHashMarker = "=="
	// keyEscapeByte introduces an escape in a key token (EncodeKeyToken).
	keyEscapeByte = '='
)

// Digest returns the digest of value that a hashed token ends with: the lower-case hex
// SHA-256 of "kube-nats-relay/token/v1", a NUL byte, and value.
func Digest(value string) string {
	h := sha256.New()
	h.Write([]byte(digestDomain))
	h.Write([]byte(value))
	return hex.EncodeToString(h.Sum(nil))
}

// SubjectToken returns value as the subject writes it: EncodeToken(value) when that is at
// most MaxTokenLen bytes long, and the hashed form otherwise:
//
//	<start>~~<digest>
//
// where start is the longest beginning of EncodeToken(value) that keeps the token within
// MaxTokenLen without cutting an escape in two, and digest is Digest(value). The hashed form
// is deterministic, names the whole value by its digest, and cannot be mistaken for a token
// EncodeToken writes, which never contains "~~". It cannot be decoded back to the value: the
// event's headers carry the exact value.
func SubjectToken(value string) string {
	return boundToken(EncodeToken(value), value, MaxTokenLen, escapeByte, hashMarker)
}

// KeyToken returns value as a key-value key token: EncodeKeyToken(value) when that is at most
// MaxKeyTokenLen bytes long, and otherwise the hashed form <start>==<digest>, built as
// SubjectToken builds it. EncodeKeyToken never writes "==", so the two forms never collide.
func KeyToken(value string) string {
	return boundToken(EncodeKeyToken(value), value, MaxKeyTokenLen, keyEscapeByte, keyHashMarker)
}

// IsHashedKeyToken reports whether tok is a key token in the hashed form: one that
// DecodeKeyToken cannot reverse.
func IsHashedKeyToken(tok string) bool { return strings.Contains(tok, keyHashMarker) }

// boundToken returns tok, the encoding of value, when it fits max, and its hashed form
// otherwise.
func boundToken(tok, value string, max int, escape byte, marker string) string {
	if len(tok) <= max {
		return tok
	}
	n := hashedStartLen(tok, max-len(marker)-DigestLen, escape)
	return tok[:n] + marker + Digest(value)
}

// hashedStartLen returns the length of the readable start of a hashed token: at most limit
// bytes of tok, cut before an escape (escape byte and two hex digits) rather than inside it.
func hashedStartLen(tok string, limit int, escape byte) int {
	n := limit
	for i := n - 1; i >= 0 && i >= n-(escapeLen-1); i-- {
		if tok[i] == escape {
			return i
		}
	}
	return n
}

// parseHashed splits a token in the hashed form into its readable start and its digest. ok
// is false when tok has no marker. The start must be the length boundToken cuts (up to two
// bytes shorter when an escape was not cut), and the digest DigestLen lower-case hex digits.
func parseHashed(tok string, max int, marker string) (start, digest string, ok bool, err error) {
	i := strings.Index(tok, marker)
	if i < 0 {
		return "", "", false, nil
	}
	start, digest = tok[:i], tok[i+len(marker):]
	limit := max - len(marker) - DigestLen
	if len(start) > limit || len(start) < limit-(escapeLen-1) {
		return "", "", true, fmt.Errorf("hashed token %q: readable start of %d bytes, want %d to %d: %w",
			tok, len(start), limit-(escapeLen-1), limit, ErrInvalidToken)
	}
	if len(digest) != DigestLen || strings.Trim(digest, "0123456789abcdef") != "" {
		return "", "", true, fmt.Errorf("hashed token %q: want %d lower-case hex digits after %q: %w", tok, DigestLen, marker, ErrInvalidToken)
	}
	return start, digest, true, nil
}

// hashedToken is the hashed subject token of a value that starts with start and whose
// digest is digest. start may be longer than a token's readable start (the one a hashed
// header value holds): it is cut as SubjectToken cuts it.
func hashedToken(start, digest string) string {
	tok := EncodeToken(start)
	if limit := MaxTokenLen - len(hashMarker) - DigestLen; len(tok) > limit {
		tok = tok[:hashedStartLen(tok, limit, escapeByte)]
	}
	return tok + hashMarker + digest
}

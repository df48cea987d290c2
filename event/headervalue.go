package event

import (
	"fmt"
	"strings"
)

// EncodeHeaderValue writes value as a header value that reaches every reader exactly. It is
// the percent-encoding the CloudEvents NATS protocol binding (1.0.3, section 3.1.3.2)
// requires of ce- header values, applied to the value's bytes: space, '"', '%' and every
// byte outside printable ASCII (0x21-0x7E) are written "%XX" with upper-case hex digits;
// every other byte is copied. So a value made of printable ASCII without '"' and '%' (every
// DNS name, "system:controller:foo") is written unchanged, and the result never holds the
// whitespace, CR or LF that nats.go trims from header values or rewrites, nor a byte
// another NATS client may not read as ASCII. DecodeHeaderValue reverses it.
func EncodeHeaderValue(value string) string {
	return escapeBytes(value, '%', &headerEscapedSet)
}

// escapeBytes writes every byte of s in escaped as the escape byte esc followed by two
// upper-case hex digits, and copies every other byte; s itself when nothing is escaped. It is
// the one encoder behind subject tokens (EncodeToken), key tokens (EncodeKeyToken), header
// values (EncodeHeaderValue) and URI segments (escapeURISegment). escaped is a table rather
// than a function: a call per byte would double the cost of encoding a plain name.
func escapeBytes(s string, esc byte, escaped *byteSet) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if escaped[s[i]] {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !escaped[c] {
			b.WriteByte(c)
			continue
		}
		b.WriteByte(esc)
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&0x0F])
	}
	return b.String()
}

// DecodeHeaderValue performs one round of percent-decoding, as the CloudEvents NATS binding
// asks of a reader: every "%XX" (hex digits in either case, needed or not) is replaced by the
// byte it names; every other byte is copied, so a value an older relay wrote unencoded
// (an inner space, UTF-8) reads as it was. A '%' not followed by two hex digits is an error
// wrapping ErrInvalidHeader. Unlike a CloudEvents reader, it does not reject bytes that are
// not UTF-8: it returns exactly the bytes EncodeHeaderValue was given.
func DecodeHeaderValue(s string) (string, error) {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("decode header value %q: offset %d: truncated escape: %w", s, i, ErrInvalidHeader)
		}
		hi, okHi := unhexAnyCase(s[i+1])
		lo, okLo := unhexAnyCase(s[i+2])
		if !okHi || !okLo {
			return "", fmt.Errorf("decode header value %q: offset %d: escape %q: want two hex digits: %w", s, i, s[i:i+3], ErrInvalidHeader)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

// byteSet is a set of bytes: the bytes an encoder escapes.
type byteSet [256]bool

// newByteSet returns the set of bytes for which in reports true.
func newByteSet(in func(byte) bool) byteSet {
	var s byteSet
	for c := range s {
		s[c] = in(byte(c))
	}
	return s
}

// headerEscapedSet is the set of bytes EncodeHeaderValue escapes.
var headerEscapedSet = newByteSet(headerEscaped)

// headerEscaped reports whether EncodeHeaderValue escapes c.
func headerEscaped(c byte) bool {
	return c <= ' ' || c >= 0x7F || c == '"' || c == '%'
}

// unhexAnyCase returns the value of a hex digit of either case.
func unhexAnyCase(c byte) (byte, bool) {
	if c >= 'a' && c <= 'f' {
		return c - 'a' + 10, true
	}
	return unhex(c)
}

// Header value bounds. JetStream refuses a message whose header block is larger than 64 KiB
// (65,535 bytes), and a name is written twice (k8s-name and ce-subject), percent-encoded (up
// to three bytes per byte). So the values that hold a name or a namespace are bounded, and a
// longer one is written in the hashed form.
const (
	// MaxHeaderValueLen is the longest k8s-namespace, k8s-name and ce-subject value written
	// in full: three of them take at most 48 KiB, leaving more than 16 KiB of the 64 KiB
	// header block for the other headers, whose values Kubernetes bounds (DNS names, uids,
	// resourceVersions) or the operator chooses (cluster).
	MaxHeaderValueLen = 16384
	// headerHashMarker separates the readable start of a hashed header value from its
	// digest. EncodeHeaderValue never writes "%7E" ("~" is printable ASCII, written as it
	// is), so the hashed form cannot collide with a value written in full; a CloudEvents
	// reader decodes it to "~~", the marker of a hashed subject token.
	headerHashMarker = "%7E%7E"
)

// HeaderValue returns value as the relay writes it in k8s-namespace, k8s-name and
// ce-subject: EncodeHeaderValue(value) when that is at most MaxHeaderValueLen bytes long, and
// otherwise the hashed form
//
//	<start>%7E%7E<digest>
//
// where start is the longest beginning of EncodeHeaderValue(value) that keeps the value within
// MaxHeaderValueLen without cutting an escape, and digest is Digest(value), the digest of the
// subject's hashed token of the same value.
func HeaderValue(value string) string {
	return boundToken(EncodeHeaderValue(value), value, MaxHeaderValueLen, '%', headerHashMarker)
}

// parseHeaderValue reads a value HeaderValue wrote: the decoded value and "" for a value in
// full; the decoded readable start and the digest for the hashed form.
func parseHeaderValue(raw string) (value, digest string, err error) {
	start, digest, hashed, err := parseHashed(raw, MaxHeaderValueLen, headerHashMarker)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	case hashed:
		v, err := DecodeHeaderValue(start)
		return v, digest, err
	}
	v, err := DecodeHeaderValue(raw)
	return v, "", err
}

package event

import (
	"fmt"
	"strings"
)

const (
	// escapeByte introduces an escape: it is followed by exactly two
	// upper-case hex digits naming one byte of the value.
	escapeByte = '~'
	// emptyToken is the token of the empty string. A subject token cannot be
	// empty, and a lone escape byte is not a complete escape, so it is free.
	emptyToken = "~"
	// upperHex are the digits of an escape. Lower-case digits are rejected so
	// that every value has exactly one token.
	upperHex = "0123456789ABCDEF"
	// escapeLen is the length of one escape: "~" and two hex digits.
	escapeLen = 3
)

// safeByte reports whether c may appear unescaped in a token: printable
// ASCII (0x21..0x7E) except the subject separator ".", the wildcards "*" and
// ">", and the escape byte "~".
func safeByte(c byte) bool {
	return c >= 0x21 && c <= 0x7E && c != '.' && c != '*' && c != '>' && c != escapeByte
}

// EncodeToken returns s written as one NATS subject token. Safe bytes (see
// the package documentation) are copied; every other byte, including "~"
// and each byte of a multi-byte UTF-8 sequence, is written "~XX" with two
// upper-case hex digits. The empty string is written "~". The result is
// never empty and never contains ".", "*", ">", whitespace or control
// characters.
func EncodeToken(s string) string {
	if s == "" {
		return emptyToken
	}
	return escapeBytes(s, escapeByte, &tokenEscaped)
}

// tokenEscaped is the set of bytes EncodeToken escapes: every byte that is not safe.
var tokenEscaped = newByteSet(func(c byte) bool { return !safeByte(c) })

// DecodeToken returns the value EncodeToken wrote as tok. It accepts only
// canonical tokens, so that EncodeToken(DecodeToken(tok)) == tok whenever
// the error is nil. It rejects, wrapping ErrInvalidToken: the empty token, a
// byte outside the safe set, an escape that is truncated or has a digit other
// than 0-9 and A-F, and an escape of a safe byte (which must be written
// plainly).
func DecodeToken(tok string) (string, error) {
	switch tok {
	case "":
		return "", fmt.Errorf("decode token %q: empty: %w", tok, ErrInvalidToken)
	case emptyToken:
		return "", nil
	}
	if !strings.ContainsRune(tok, escapeByte) {
		// Fast path: a plain token decodes to itself if every byte is safe.
		for i := 0; i < len(tok); i++ {
			if !safeByte(tok[i]) {
				return "", badToken(tok, i, fmt.Sprintf("byte 0x%02X must be escaped", tok[i]))
			}
		}
		return tok, nil
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); {
		c := tok[i]
		switch {
		case safeByte(c):
			b = append(b, c)
			i++
		case c == escapeByte:
			if i+escapeLen > len(tok) {
				return "", badToken(tok, i, "truncated escape")
			}
			hi, okHi := unhex(tok[i+1])
			lo, okLo := unhex(tok[i+2])
			if !okHi || !okLo {
				return "", badToken(tok, i, fmt.Sprintf("escape %q: want two upper-case hex digits", tok[i:i+escapeLen]))
			}
			v := hi<<4 | lo
			if safeByte(v) {
				return "", badToken(tok, i, fmt.Sprintf("escape %q of safe byte %q: write it plainly", tok[i:i+escapeLen], v))
			}
			b = append(b, v)
			i += escapeLen
		default:
			return "", badToken(tok, i, fmt.Sprintf("byte 0x%02X must be escaped", c))
		}
	}
	return string(b), nil
}

// unhex returns the value of an upper-case hex digit.
func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// badToken builds the error for a malformed token.
func badToken(tok string, offset int, reason string) error {
	return fmt.Errorf("decode token %q: offset %d: %s: %w", tok, offset, reason, ErrInvalidToken)
}

// escapeFirst returns tok with its first byte written as an escape. It turns
// a reserved placeholder token ("core", "_") into the token of the literal
// value, which DecodeToken alone rejects as non-canonical, so the two can
// never be confused.
func escapeFirst(tok string) string {
	c := tok[0]
	return string([]byte{escapeByte, upperHex[c>>4], upperHex[c&0x0F]}) + tok[1:]
}

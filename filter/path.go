package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Path is a parsed field path such as status.phase,
// metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
// or status.conditions[*].lastHeartbeatTime.
//
// Grammar: segments separated by "."; a segment is a map key made of any
// characters except . [ ] " \ and white space; ["any key"] is a quoted key
// (JSON string escapes) for keys with such characters, written directly
// after the previous segment without a "."; [*] matches every element of
// an array and every value of a map. A bare "*" is rejected because it
// would read like a wildcard; write [*] or ["*"]. Paths never index arrays
// by position.
type Path []Segment

// Segment is one step of a Path: a map key, or any element (Wildcard).
type Segment struct {
	// Key is the map key; empty when Wildcard.
	Key string
	// Wildcard matches every element of an array and every value of a map.
	Wildcard bool
}

// PathError is a syntax error in a field path.
type PathError struct {
	// Path is the text given to ParsePath.
	Path string
	// Offset is the byte offset of the problem in Path (0-based).
	Offset int
	// Message says what is wrong.
	Message string
}

// Error returns the problem with its 1-based column.
func (e *PathError) Error() string {
	return fmt.Sprintf("path %q: column %d: %s", e.Path, e.Offset+1, e.Message)
}

// ParsePath parses a field path. Errors are *PathError.
func ParsePath(s string) (Path, error) {
	fail := func(off int, format string, args ...any) (Path, error) {
		return nil, &PathError{Path: s, Offset: off, Message: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return fail(0, "empty path")
	}
	if !utf8.ValidString(s) {
		return fail(invalidUTF8(s), "invalid UTF-8")
	}
	var p Path
	i := 0
	for i < len(s) {
		switch {
		case s[i] == '[':
			seg, n, err := parseBracket(s, i)
			if err != nil {
				return nil, err
			}
			p = append(p, seg)
			i = n
		case len(p) > 0 && s[i] != '.':
			return fail(i, "expected \".\" or \"[\" after a segment, found %q", rune(s[i]))
		default:
			if len(p) > 0 {
				i++ // the "."
			}
			start := i
			for i < len(s) {
				r, size := utf8.DecodeRuneInString(s[i:])
				if !bareKeyRune(r) {
					break
				}
				i += size
			}
			key := s[start:i]
			switch {
			case key == "" && i < len(s) && s[i] != '.' && s[i] != '[':
				r, _ := utf8.DecodeRuneInString(s[i:])
				return fail(i, "unexpected %q in a key (quote the key: [\"...\"])", r)
			case key == "":
				return fail(i, "empty segment")
			case key == "*":
				return fail(start, "bare \"*\": write [*] for any element or [\"*\"] for the key")
			}
			p = append(p, Segment{Key: key})
		}
	}
	return p, nil
}

// parseBracket parses [*] or ["key"] starting at s[i] == '[' and returns
// the segment and the offset after the closing bracket.
func parseBracket(s string, i int) (Segment, int, error) {
	fail := func(off int, msg string) (Segment, int, error) {
		return Segment{}, 0, &PathError{Path: s, Offset: off, Message: msg}
	}
	j := i + 1
	switch {
	case j >= len(s):
		return fail(i, "unterminated \"[\"")
	case s[j] == '*':
		if j+1 >= len(s) || s[j+1] != ']' {
			return fail(i, "unterminated \"[*\"")
		}
		return Segment{Wildcard: true}, j + 2, nil
	case s[j] != '"':
		return fail(j, "expected * or a quoted key after \"[\"")
	}
	// Find the closing quote, skipping escaped characters.
	k := j + 1
	for ; k < len(s) && s[k] != '"'; k++ {
		if s[k] == '\\' {
			k++
		}
	}
	if k >= len(s) {
		return fail(j, "unterminated quoted key")
	}
	var key string
	if err := json.Unmarshal([]byte(s[j:k+1]), &key); err != nil {
		return fail(j, "bad quoted key: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	if key == "" {
		return fail(j, "empty key")
	}
	if k+1 >= len(s) || s[k+1] != ']' {
		return fail(k+1, "expected \"]\" after the quoted key")
	}
	return Segment{Key: key}, k + 2, nil
}

// bareKeyRune reports whether r may appear in an unquoted key.
func bareKeyRune(r rune) bool {
	switch r {
	case '.', '[', ']', '"', '\\':
		return false
	}
	return !unicode.IsSpace(r)
}

// invalidUTF8 returns the offset of the first invalid UTF-8 byte in s.
func invalidUTF8(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return 0
}

// MustParsePath is ParsePath for constant paths; it panics on error.
func MustParsePath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the canonical spelling of p; ParsePath(p.String())
// returns p for every p that ParsePath returned.
func (p Path) String() string {
	var b strings.Builder
	for i, seg := range p {
		switch {
		case seg.Wildcard:
			b.WriteString("[*]")
		case bareKey(seg.Key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg.Key)
		default:
			b.WriteByte('[')
			q, _ := json.Marshal(seg.Key) // a string always encodes
			b.Write(q)
			b.WriteByte(']')
		}
	}
	return b.String()
}

// bareKey reports whether key can be written without quotes.
func bareKey(key string) bool {
	if key == "" || key == "*" || !utf8.ValidString(key) {
		return false
	}
	for _, r := range key {
		if !bareKeyRune(r) {
			return false
		}
	}
	return true
}

package rawread

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// A small JSON scanner for the read-as-is path (asread.go): it finds the spans of values and
// members without decoding them, so that an object's JSON can be published with a few members
// cut out at the cost of one pass over its bytes. It checks structure (strings, nesting,
// separators) but not the spelling of numbers and literals: its input is the apiserver's own
// encoding, and what it returns is that input with whole members removed.

// errTruncated reports JSON that ends before its value does.
var errTruncated = errors.New("unexpected end of JSON input")

// maxJSONDepth bounds nesting, like encoding/json's limit: a hostile or broken input cannot
// make the scanner's stack grow without bound.
const maxJSONDepth = 10000

func syntaxError(i int, what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", i, what)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string whose opening quote is b[i].
func skipString(b []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, errTruncated
		}
		end := i + j
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := end - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return end + 1, nil
		}
		i = end + 1
	}
}

// skipLiteral returns the index just past the number, true, false or null at b[i].
func skipLiteral(b []byte, i int) (int, error) {
	j := i
	for j < len(b) {
		c := b[j]
		if c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			j++
			continue
		}
		break
	}
	if j == i {
		if i >= len(b) {
			return 0, errTruncated
		}
		return 0, syntaxError(i, fmt.Sprintf("unexpected %q", b[i]))
	}
	return j, nil
}

// skipValue returns the index just past the JSON value that starts at b[i] (after
// whitespace).
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, errTruncated
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipContainer(b, i)
	}
	return skipLiteral(b, i)
}

// skipContainer returns the index just past the object or array that opens at b[i],
// checking that brackets match and that members and elements are separated properly.
func skipContainer(b []byte, i int) (int, error) {
	var stackBuf [64]byte // no allocation for the nesting of ordinary objects
	stack := stackBuf[:0]
	// expect says what may come next: a value (or a closing bracket right after an
	// opening one), a key, or a separator.
	const (
		wantValueOrClose = iota
		wantValue
		wantKeyOrClose
		wantKey
		wantColon
		wantSep
	)
	state := wantValue
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, errTruncated
		}
		c := b[i]
		switch state {
		case wantValue, wantValueOrClose:
			switch {
			case c == '{' || c == '[':
				if len(stack) >= maxJSONDepth {
					return 0, syntaxError(i, "nested too deeply")
				}
				stack = append(stack, c)
				i++
				state = wantValueOrClose
				if c == '{' {
					state = wantKeyOrClose
				}
				continue
			case c == ']' && state == wantValueOrClose:
				// handled below as a close
			case c == '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i, state = j, wantSep
				continue
			default:
				j, err := skipLiteral(b, i)
				if err != nil {
					return 0, err
				}
				i, state = j, wantSep
				continue
			}
		case wantKey, wantKeyOrClose:
			if c == '"' {
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i, state = j, wantColon
				continue
			}
			if c != '}' || state != wantKeyOrClose {
				return 0, syntaxError(i, "expected a key")
			}
		case wantColon:
			if c != ':' {
				return 0, syntaxError(i, "expected ':'")
			}
			i, state = i+1, wantValue
			continue
		case wantSep:
			if c == ',' {
				i++
				state = wantValue
				if stack[len(stack)-1] == '{' {
					state = wantKey
				}
				continue
			}
		}
		// A closing bracket.
		top := stack[len(stack)-1]
		if (c == '}' && top != '{') || (c == ']' && top != '[') || (c != '}' && c != ']') {
			return 0, syntaxError(i, fmt.Sprintf("unexpected %q", c))
		}
		stack = stack[:len(stack)-1]
		i++
		if len(stack) == 0 {
			return i, nil
		}
		state = wantSep
	}
}

// member is one member of a JSON object: b[keyStart:keyEnd] is its key with the quotes,
// b[valStart:valEnd] its value.
type member struct {
	keyStart, keyEnd int
	valStart, valEnd int
}

// key returns the member's key, unescaped.
func (m member) key(b []byte) (string, error) {
	return unquote(b[m.keyStart:m.keyEnd])
}

// keyIs reports whether the member's key is k; keys with escapes are unescaped first.
func (m member) keyIs(b []byte, k string) bool {
	raw := b[m.keyStart+1 : m.keyEnd-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == k
	}
	s, err := m.key(b)
	return err == nil && s == k
}

// unquote returns the JSON string q (with its quotes) unescaped.
func unquote(q []byte) (string, error) {
	raw := q[1 : len(q)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), nil
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", err
	}
	return s, nil
}

// members appends to dst the members of the object that starts at b[i] (after whitespace)
// and returns them with the index just past the object. Values are checked with skipValue.
func members(dst []member, b []byte, i int) ([]member, int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return nil, 0, errTruncated
	}
	if b[i] != '{' {
		return nil, 0, syntaxError(i, "expected an object")
	}
	out := dst[:0]
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, i + 1, nil
	}
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, 0, errTruncated
		}
		if b[i] != '"' {
			return nil, 0, syntaxError(i, "expected a key")
		}
		m := member{keyStart: i}
		j, err := skipString(b, i)
		if err != nil {
			return nil, 0, err
		}
		m.keyEnd = j
		i = skipSpace(b, j)
		if i >= len(b) {
			return nil, 0, errTruncated
		}
		if b[i] != ':' {
			return nil, 0, syntaxError(i, "expected ':'")
		}
		m.valStart = skipSpace(b, i+1)
		if m.valEnd, err = skipValue(b, m.valStart); err != nil {
			return nil, 0, err
		}
		i = skipSpace(b, m.valEnd)
		if i >= len(b) {
			return nil, 0, errTruncated
		}
		switch b[i] {
		case ',':
			out = append(out, m)
			i++
		case '}':
			return append(out, m), i + 1, nil
		default:
			return nil, 0, syntaxError(i, "expected ',' or '}'")
		}
	}
}

// find returns the index in ms of the member with key k, -1 when there is none (the last
// one when a key repeats, as decoding into a map would keep).
func find(b []byte, ms []member, k string) int {
	at := -1
	for i, m := range ms {
		if m.keyIs(b, k) {
			at = i
		}
	}
	return at
}

// frames splits a stream of JSON values, such as a watch response, into whole values. The
// apiserver writes one value per line and JSON strings cannot hold a raw newline, so a value
// can only end at a newline: each line end is a candidate, confirmed by scanning from the
// value's start.
type frames struct {
	r          io.Reader
	buf        []byte
	start, end int // unread data: buf[start:end]
	scanned    int // bytes from start searched for newlines
	// pending is the length from start to the last newline not yet tried as the value's
	// end, tried the length of the last candidate found short (0: none).
	pending, tried int
	err            error
}

const (
	// framesInitial is the first buffer size: most events are a few KiB.
	framesInitial = 64 << 10
	// framesMax bounds one value: several times the largest object etcd stores (1.5 MiB
	// by default) with room for escaping, so that a broken stream cannot take all memory.
	framesMax = 64 << 20
)

// next returns the next value; the slice is valid until the following call. It returns
// io.EOF at the end of the stream and io.ErrUnexpectedEOF when the stream ends in a value.
//
// A value is tried at a newline only once it has doubled since its last try, and at the last
// newline before waiting for more input: a value pretty-printed over many lines then costs
// linear time, and a value is never held back waiting for the next one.
func (f *frames) next() ([]byte, error) {
	for {
		for {
			nl := bytes.IndexByte(f.buf[f.start+f.scanned:f.end], '\n')
			if nl < 0 {
				f.scanned = f.end - f.start
				break
			}
			f.scanned += nl + 1
			if f.scanned < 2*f.tried {
				f.pending = f.scanned
				continue
			}
			if v, ok, err := f.try(f.scanned); ok || err != nil {
				return v, err
			}
		}
		if f.pending > f.tried {
			if v, ok, err := f.try(f.pending); ok || err != nil {
				return v, err
			}
		}
		if f.err != nil {
			if len(bytes.TrimSpace(f.buf[f.start:f.end])) > 0 {
				if e, err := skipValue(f.buf[f.start:f.end], 0); err == nil && len(bytes.TrimSpace(f.buf[f.start+e:f.end])) == 0 {
					v := bytes.TrimSpace(f.buf[f.start : f.start+e])
					f.consume(f.end - f.start)
					return v, nil // a last value without a newline
				}
				if errors.Is(f.err, io.EOF) {
					return nil, io.ErrUnexpectedEOF
				}
			}
			return nil, f.err
		}
		if f.end == len(f.buf) {
			if f.start > 0 {
				f.end = copy(f.buf, f.buf[f.start:f.end])
				f.start = 0
			}
			if f.end == len(f.buf) {
				size := max(2*len(f.buf), framesInitial)
				if size > framesMax {
					return nil, fmt.Errorf("watch event larger than %d bytes", framesMax)
				}
				f.buf = append(f.buf, make([]byte, size-len(f.buf))...)
			}
		}
		n, err := f.r.Read(f.buf[f.end:])
		f.end += n
		f.err = err
	}
}

// try reads the value at the front of the first n unread bytes, which end with a newline:
// ok when it is whole. Blank bytes are skipped (not ok, no error).
func (f *frames) try(n int) (v []byte, ok bool, err error) {
	cand := f.buf[f.start : f.start+n]
	s := skipSpace(cand, 0)
	if s == len(cand) { // blank lines: skip them, look further
		f.consume(n)
		return nil, false, nil
	}
	e, err := skipValue(cand, s)
	if errors.Is(err, errTruncated) {
		f.tried, f.pending = n, 0 // the newline was whitespace inside the value
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	f.consume(e)
	return cand[s:e], true, nil
}

// consume drops the first n unread bytes and the scan state that referred to them.
func (f *frames) consume(n int) {
	f.start += n
	f.scanned, f.pending, f.tried = 0, 0, 0
}

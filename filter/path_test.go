package filter

import (
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Path
		// canonical is the String of the result when it differs from in.
		canonical string
	}{
		{name: "one key", in: "spec", want: Path{{Key: "spec"}}},
		{name: "nested", in: "status.phase", want: Path{{Key: "status"}, {Key: "phase"}}},
		{name: "wildcard", in: "status.conditions[*].lastHeartbeatTime",
			want: Path{{Key: "status"}, {Key: "conditions"}, {Wildcard: true}, {Key: "lastHeartbeatTime"}}},
		{name: "quoted key", in: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
			want: Path{{Key: "metadata"}, {Key: "annotations"}, {Key: "kubectl.kubernetes.io/last-applied-configuration"}}},
		{name: "quoted plain key is canonicalised", in: `metadata["name"]`,
			want: Path{{Key: "metadata"}, {Key: "name"}}, canonical: "metadata.name"},
		{name: "leading wildcard", in: "[*].x", want: Path{{Wildcard: true}, {Key: "x"}}},
		{name: "leading quoted", in: `["a b"].c`, want: Path{{Key: "a b"}, {Key: "c"}}},
		{name: "quoted star", in: `a["*"]`, want: Path{{Key: "a"}, {Key: "*"}}},
		{name: "escapes", in: `a["q\"b\\s\u00e9"]`, want: Path{{Key: "a"}, {Key: "q\"b\\s\u00e9"}}, canonical: `a["q\"b\\sé"]`},
		{name: "unicode bare key", in: "données.clé", want: Path{{Key: "données"}, {Key: "clé"}}},
		{name: "bare key with slash and colon", in: "a/b:c", want: Path{{Key: "a/b:c"}}},
		{name: "double wildcard", in: "a[*][*]", want: Path{{Key: "a"}, {Wildcard: true}, {Wildcard: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePath(tt.in)
			if err != nil {
				t.Fatalf("ParsePath(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParsePath(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			want := tt.canonical
			if want == "" {
				want = tt.in
			}
			if s := got.String(); s != want {
				t.Errorf("String() = %q, want %q", s, want)
			}
		})
	}
}

func TestParsePathErrors(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantOffset int
	}{
		{name: "empty", in: "", wantOffset: 0},
		{name: "leading dot", in: ".a", wantOffset: 0},
		{name: "trailing dot", in: "a.", wantOffset: 2},
		{name: "empty segment", in: "a..b", wantOffset: 2},
		{name: "dot before bracket", in: `a.["b"]`, wantOffset: 2},
		{name: "unterminated bracket", in: "a[", wantOffset: 1},
		{name: "unterminated wildcard", in: "a[*", wantOffset: 1},
		{name: "unterminated quote", in: `a["b`, wantOffset: 2},
		{name: "escaped closing quote", in: `a["b\"]`, wantOffset: 2},
		{name: "missing closing bracket", in: `a["b"`, wantOffset: 5},
		{name: "junk after quote", in: `a["b"x]`, wantOffset: 5},
		{name: "index", in: "a[0]", wantOffset: 2},
		{name: "empty brackets", in: "a[]", wantOffset: 2},
		{name: "empty quoted key", in: `a[""]`, wantOffset: 2},
		{name: "bad escape", in: `a["\x"]`, wantOffset: 2},
		{name: "space", in: "a b", wantOffset: 1},
		{name: "space after dot", in: "a. b", wantOffset: 2},
		{name: "closing bracket", in: "a]", wantOffset: 1},
		{name: "quote in key", in: `a"b`, wantOffset: 1},
		{name: "backslash in key", in: `a\b`, wantOffset: 1},
		{name: "bare star", in: "a.*.b", wantOffset: 2},
		{name: "junk after bracket", in: "a[*]b", wantOffset: 4},
		{name: "invalid UTF-8", in: "a.\xffb", wantOffset: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePath(tt.in)
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePath(%q) = %v, %v; want a *PathError", tt.in, p, err)
			}
			if pe.Offset != tt.wantOffset {
				t.Errorf("ParsePath(%q): offset %d (%s), want %d", tt.in, pe.Offset, pe.Message, tt.wantOffset)
			}
			if pe.Path != tt.in {
				t.Errorf("PathError.Path = %q, want %q", pe.Path, tt.in)
			}
		})
	}
}

// checkRoundTrip fails when p does not survive String and ParsePath.
func checkRoundTrip(t *testing.T, p Path) {
	t.Helper()
	s := p.String()
	q, err := ParsePath(s)
	if err != nil {
		t.Fatalf("ParsePath(%q) of %#v: %v", s, p, err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip of %#v via %q = %#v", p, s, q)
	}
	if s2 := q.String(); s2 != s {
		t.Fatalf("String not canonical: %q then %q", s, s2)
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"spec", "a.b[*].c", `a["b.c/d"]`, `["\u0000"]`, "a..b", `a["`, "[*]", "x[\"\\\"\"]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(s) {
				t.Fatalf("ParsePath(%q): bad error %v", s, err)
			}
			return
		}
		if len(p) == 0 {
			t.Fatalf("ParsePath(%q) returned an empty path", s)
		}
		checkRoundTrip(t, p)
	})
}

func FuzzPathString(f *testing.F) {
	f.Add("metadata", "kubectl.kubernetes.io/x", false)
	f.Add("a b", "*", true)
	f.Fuzz(func(t *testing.T, k1, k2 string, wildcard bool) {
		if k1 == "" || k2 == "" || !utf8.ValidString(k1) || !utf8.ValidString(k2) {
			t.Skip("keys are non-empty valid UTF-8")
		}
		p := Path{{Key: k1}, {Key: k2}}
		if wildcard {
			p = Path{{Key: k1}, {Wildcard: true}, {Key: k2}}
		}
		checkRoundTrip(t, p)
	})
}

package event

import (
	"errors"
	"strings"
	"testing"
)

// trickyStrings seed the fuzz corpora and the table tests: separators,
// wildcards, the escape byte, escapes, whitespace, non-ASCII, placeholders.
var trickyStrings = []string{
	"", ".", "*", ">", "~", "~2E", "a b", "\t", "日本", "core", "_",
	"~63ore", "~5F", "kube-root-ca.crt", "system:controller:foo", "\x00", "\xff", "a.b.c", "**", ">>", "~~",
}

// checkNATSToken fails the test unless tok is usable as one NATS subject
// token: non-empty, printable ASCII only, no separator and no wildcard.
func checkNATSToken(t *testing.T, tok string) {
	t.Helper()
	if tok == "" {
		t.Fatalf("token is empty")
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c <= ' ' || c >= 0x7F || c == '.' || c == '*' || c == '>' {
			t.Fatalf("token %q: byte 0x%02X at offset %d is not allowed in a NATS token", tok, c, i)
		}
	}
}

func TestEncodeToken(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "plain", in: "deployments", want: "deployments"},
		{name: "empty", in: "", want: "~"},
		{name: "dot in configmap name", in: "kube-root-ca.crt", want: "kube-root-ca~2Ecrt"},
		{name: "colons stay", in: "system:controller:foo", want: "system:controller:foo"},
		{name: "star", in: "*", want: "~2A"},
		{name: "greater than", in: ">", want: "~3E"},
		{name: "escape byte itself", in: "~", want: "~7E"},
		{name: "literal escape text", in: "~2E", want: "~7E2E"},
		{name: "space", in: "a b", want: "a~20b"},
		{name: "tab", in: "\t", want: "~09"},
		{name: "NUL", in: "\x00", want: "~00"},
		{name: "DEL", in: "\x7f", want: "~7F"},
		{name: "high byte", in: "\xff", want: "~FF"},
		{name: "utf-8 byte by byte", in: "日本", want: "~E6~97~A5~E6~9C~AC"},
		{name: "other printable kept", in: "a/b:c_d-e$f", want: "a/b:c_d-e$f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EncodeToken(tt.in); got != tt.want {
				t.Errorf("EncodeToken(%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDecodeToken(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "plain", in: "deployments", want: "deployments"},
		{name: "lone escape is empty string", in: "~", want: ""},
		{name: "escaped dot", in: "kube-root-ca~2Ecrt", want: "kube-root-ca.crt"},
		{name: "escaped escape", in: "~7E2E", want: "~2E"},
		{name: "utf-8", in: "~E6~97~A5~E6~9C~AC", want: "日本"},
		{name: "empty token", in: "", wantErr: true},
		{name: "lower-case hex", in: "a~2eb", wantErr: true},
		{name: "non-hex digit", in: "~G0", wantErr: true},
		{name: "truncated escape one digit", in: "ab~2", wantErr: true},
		{name: "truncated escape no digit", in: "ab~", wantErr: true},
		{name: "double escape byte", in: "~~", wantErr: true},
		{name: "escape of safe byte", in: "~61", wantErr: true},
		{name: "escaped placeholder core is not a plain token", in: "~63ore", wantErr: true},
		{name: "raw dot", in: "a.b", wantErr: true},
		{name: "raw star", in: "*", wantErr: true},
		{name: "raw greater than", in: ">", wantErr: true},
		{name: "raw space", in: "a b", wantErr: true},
		{name: "raw tab after escape", in: "~20\t", wantErr: true},
		{name: "raw high byte", in: "\xff", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeToken(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("DecodeToken(%q): got value %q, error %v, want error wrapping %v", tt.in, got, err, ErrInvalidToken)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeToken(%q): got error %v, want nil", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("DecodeToken(%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEscapeFirstMatchesLiterals(t *testing.T) {
	tests := []struct {
		name        string
		placeholder string
		want        string
	}{
		{name: "core group", placeholder: CoreGroupToken, want: coreGroupLiteral},
		{name: "cluster-scoped namespace", placeholder: ClusterScopedToken, want: clusterScopedLiteral},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := escapeFirst(tt.placeholder); got != tt.want {
				t.Errorf("escapeFirst(%q): got %q, want %q", tt.placeholder, got, tt.want)
			}
			if got := EncodeToken(tt.placeholder); got != tt.placeholder {
				t.Errorf("EncodeToken(%q): got %q, want the placeholder unchanged", tt.placeholder, got)
			}
		})
	}
}

// FuzzTokenRoundTrip checks both directions of the token encoding: every
// string survives Encode then Decode and encodes to a valid NATS token, and
// every token Decode accepts is canonical (Encode gives it back).
func FuzzTokenRoundTrip(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Add(strings.Repeat("~7E", 3))
	f.Fuzz(func(t *testing.T, s string) {
		tok := EncodeToken(s)
		checkNATSToken(t, tok)
		got, err := DecodeToken(tok)
		if err != nil {
			t.Fatalf("DecodeToken(EncodeToken(%q) = %q): got error %v, want nil", s, tok, err)
		}
		if got != s {
			t.Fatalf("DecodeToken(EncodeToken(%q) = %q): got %q, want %q", s, tok, got, s)
		}

		// The fuzz input read as a token.
		v, err := DecodeToken(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("DecodeToken(%q): got error %v, want one wrapping %v", s, err, ErrInvalidToken)
			}
			return
		}
		checkNATSToken(t, s)
		if back := EncodeToken(v); back != s {
			t.Fatalf("EncodeToken(DecodeToken(%q) = %q): got %q, want %q", s, v, back, s)
		}
	})
}

package event

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestEncodeHeaderValue(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "DNS name unchanged", in: "kube-root-ca.crt", want: "kube-root-ca.crt"},
		{name: "RBAC name unchanged", in: "system:controller:foo", want: "system:controller:foo"},
		{name: "empty unchanged", in: "", want: ""},
		{name: "leading space", in: " lead", want: "%20lead"},
		{name: "trailing space", in: "trail ", want: "trail%20"},
		{name: "newline", in: "a\nb", want: "a%0Ab"},
		{name: "CR LF and tab", in: "\r\n\t", want: "%0D%0A%09"},
		{name: "percent and quote", in: `50%"`, want: "50%25%22"},
		{name: "UTF-8 bytes", in: "€", want: "%E2%82%AC"},
		{name: "CloudEvents binding example", in: "Euro € 😀", want: "Euro%20%E2%82%AC%20%F0%9F%98%80"},
		{name: "tilde kept", in: "~~", want: "~~"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EncodeHeaderValue(tt.in)
			if got != tt.want {
				t.Fatalf("EncodeHeaderValue(%q): got %q, want %q", tt.in, got, tt.want)
			}
			back, err := DecodeHeaderValue(got)
			if err != nil || back != tt.in {
				t.Fatalf("DecodeHeaderValue(%q): got %q, %v, want %q", got, back, err, tt.in)
			}
		})
	}
}

func TestDecodeHeaderValue(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "lower-case hex accepted", in: "a%2fb", want: "a/b"},
		{name: "needless escape accepted", in: "%61", want: "a"},
		{name: "raw value of an older relay kept", in: "a b日本", want: "a b日本"},
		{name: "truncated escape", in: "a%2", wantErr: true},
		{name: "bad hex digit", in: "%G0", wantErr: true},
		{name: "lone percent", in: "%", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeHeaderValue(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidHeader) {
					t.Fatalf("DecodeHeaderValue(%q): got %q, %v, want an error wrapping %v", tt.in, got, err, ErrInvalidHeader)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DecodeHeaderValue(%q): got %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCESourceKeepsGroupLiterallyCoreApart(t *testing.T) {
	core := Meta{Cluster: "c", Version: "v1", Resource: "things"}
	literal := core
	literal.Group = "core"
	a, b := core.Header().Get(HeaderCESource), literal.Header().Get(HeaderCESource)
	// One round of percent-decoding (the binding) and the URI's own normalization (decoding
	// percent-encoded unreserved characters) must both leave them apart.
	for _, read := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { v, _ := DecodeHeaderValue(s); return v },
		func(s string) string { v, _ := DecodeHeaderValue(s); v, _ = DecodeHeaderValue(v); return v },
	} {
		if read(a) == read(b) {
			t.Fatalf("ce-source of the core group %q and of a group literally core %q read the same: %q", a, b, read(a))
		}
	}
	if b != "kube-nats-relay://c/!core/v1/things" {
		t.Errorf("ce-source of a group literally core: got %q", b)
	}
}

func TestHeaderValueHashesNamesOverTheBound(t *testing.T) {
	full := strings.Repeat("a", MaxHeaderValueLen)
	if got := HeaderValue(full); got != full {
		t.Errorf("HeaderValue of exactly MaxHeaderValueLen bytes: got %d bytes, want it in full", len(got))
	}
	long := strings.Repeat("é", 20000) // 40,000 bytes, 120,000 encoded
	got := HeaderValue(long)
	if len(got) > MaxHeaderValueLen || !strings.HasSuffix(got, headerHashMarker+Digest(long)) {
		t.Fatalf("HeaderValue of a long name: got %d bytes ending %q, want at most %d ending with the marker and digest",
			len(got), got[max(0, len(got)-80):], MaxHeaderValueLen)
	}
	v, digest, err := parseHeaderValue(got)
	if err != nil || digest != Digest(long) || !strings.HasPrefix(long, v) {
		t.Fatalf("parseHeaderValue: got %d bytes, digest %q, %v; want a start of the name and its digest", len(v), digest, err)
	}
}

// TestLongNameThroughNATS publishes an event of a name far longer than any header may hold:
// JetStream takes it (the header block stays under 64 KiB), and MetaFromHeader names it by
// its digest, with the subject's digest the same.
func TestLongNameThroughNATS(t *testing.T) {
	m := wireMeta(0)
	m.Name = strings.Repeat("é", 50000)
	got := throughNATS(t, &nats.Msg{Subject: m.Subject(wirePrefix).String(), Header: m.Header(), Data: []byte("{}")})
	back, err := MetaFromHeader(got.Header)
	if err != nil {
		t.Fatalf("MetaFromHeader: %v", err)
	}
	if back.Exact() || back.Digests != (Digests{Name: Digest(m.Name)}) || !strings.HasPrefix(m.Name, back.Name) {
		t.Fatalf("MetaFromHeader: got digests %+v and a name of %d bytes, want the name's digest and its start", back.Digests, len(back.Name))
	}
	s, err := ParseSubject(wirePrefix, got.Subject)
	if err != nil || s.Digests.Name != back.Digests.Name {
		t.Fatalf("ParseSubject: got digests %+v, %v, want the header's %q", s.Digests, err, back.Digests.Name)
	}
	if back.Subject(wirePrefix).String() != got.Subject {
		t.Errorf("Subject of the decoded Meta: got %q, want %q", back.Subject(wirePrefix).String(), got.Subject)
	}
}

// FuzzHeaderValueThroughNATS sends an arbitrary value through a real nats-server, as the
// name of an event and as a header value of its own: what the subscriber reads must give the
// exact value back.
func FuzzHeaderValueThroughNATS(f *testing.F) {
	for _, s := range append(trickyStrings, " lead", "trail ", "a\nb", "\r\n", " \t ", `"quoted"`, "50%", "%41",
		"%7E%7E", "Euro € 😀", "\x7f\x80", strings.Repeat(" ", 100), strings.Repeat("x", 4100),
		// The header bound: ce-subject ("<value>/<value>") hashed alone, a value that just
		// fits, one byte over, and one whose escapes cross it.
		strings.Repeat("x", MaxHeaderValueLen/2), strings.Repeat("x", MaxHeaderValueLen),
		strings.Repeat("x", MaxHeaderValueLen+1), strings.Repeat("%", MaxHeaderValueLen/3+1)) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		if value == "" {
			value = "-" // a name is never empty
		}
		m := wireMeta(1)
		m.Name = value
		m.Namespace = value
		h := m.Header()
		// x-value carries the value in full, unbounded: it is left out when k8s-namespace,
		// k8s-name and ce-subject near the bound already fill most of the 64 KiB header block.
		fits := len(EncodeHeaderValue(value)) <= MaxHeaderValueLen
		withX := len(EncodeHeaderValue(value)) <= MaxHeaderValueLen/2
		if withX {
			h.Set("x-value", EncodeHeaderValue(value))
		}
		got := throughNATS(t, &nats.Msg{Subject: m.Subject(wirePrefix).String(), Header: h, Data: []byte("{}")})

		if raw := got.Header.Get("x-value"); withX && raw != EncodeHeaderValue(value) {
			t.Fatalf("x-value: nats changed %q to %q", EncodeHeaderValue(value), raw)
		} else if back, err := DecodeHeaderValue(raw); withX && (err != nil || back != value) {
			t.Fatalf("DecodeHeaderValue(%q): got %q, %v, want %q", raw, back, err, value)
		}
		back, err := MetaFromHeader(got.Header)
		if err != nil {
			t.Fatalf("MetaFromHeader: got error %v, want nil", err)
		}
		if !fits {
			// Past the bound, namespace and name come as a readable start and a digest.
			want := Digests{Namespace: Digest(value), Name: Digest(value)}
			if back.Digests != want || !strings.HasPrefix(value, back.Namespace) || !strings.HasPrefix(value, back.Name) {
				t.Fatalf("MetaFromHeader of a value past the bound: got digests %+v, want %+v and starts of the value", back.Digests, want)
			}
			back.Namespace, back.Name, back.Digests = m.Namespace, m.Name, Digests{}
		}
		if back != m {
			t.Fatalf("MetaFromHeader: got %+v, want %+v", back, m)
		}
	})
}

package event

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// dnsSubdomain is the longest DNS subdomain with the most dots: 253 characters, each "."
// written as a 3-byte escape. It must stay written in full.
var dnsSubdomain = strings.Repeat("a.", 126) + "a"

func TestSubjectTokenKeepsShortValuesAndHashesLongOnes(t *testing.T) {
	long := strings.Repeat("x", 4100)
	tests := []struct {
		name       string
		in         string
		wantHashed bool
		wantStart  string
	}{
		{name: "plain name in full", in: "web", wantStart: "web"},
		{name: "longest DNS subdomain in full", in: dnsSubdomain, wantStart: EncodeToken(dnsSubdomain)},
		{name: "value whose token is exactly the bound in full", in: strings.Repeat("b", MaxTokenLen), wantStart: strings.Repeat("b", MaxTokenLen)},
		{name: "one byte over the bound hashed", in: strings.Repeat("b", MaxTokenLen+1), wantHashed: true, wantStart: strings.Repeat("b", MaxTokenLen-len(hashMarker)-DigestLen)},
		{name: "4,100-character name hashed", in: long, wantHashed: true, wantStart: strings.Repeat("x", MaxTokenLen-len(hashMarker)-DigestLen)},
		// 446 = 148 escapes and 2 bytes: the cut would split the 149th escape, so the
		// readable start stops before it.
		{name: "escape never cut in two", in: strings.Repeat(".", 300), wantHashed: true, wantStart: strings.Repeat("~2E", 148)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := SubjectToken(tt.in)
			checkNATSToken(t, tok)
			if len(tok) > MaxTokenLen {
				t.Fatalf("SubjectToken: got %d bytes, want at most %d", len(tok), MaxTokenLen)
			}
			if !tt.wantHashed {
				if tok != tt.wantStart {
					t.Fatalf("SubjectToken: got %q, want %q", tok, tt.wantStart)
				}
				return
			}
			want := tt.wantStart + "~~" + Digest(tt.in)
			if tok != want {
				t.Fatalf("SubjectToken: got %q, want %q", tok, want)
			}
			if _, err := DecodeToken(tok); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("DecodeToken(hashed %q): got %v, want an error wrapping %v: a hashed token must never read as a plain one", tok, err, ErrInvalidToken)
			}
		})
	}
}

func TestSubjectTokenOfLongValuesSharingTheirStartDiffer(t *testing.T) {
	a := strings.Repeat("x", 5000) + "a"
	b := strings.Repeat("x", 5000) + "b"
	if SubjectToken(a) == SubjectToken(b) {
		t.Fatalf("SubjectToken: two values differing only past the readable start got the same token %q", SubjectToken(a))
	}
	if KeyToken(a) == KeyToken(b) {
		t.Fatalf("KeyToken: two values differing only past the readable start got the same token %q", KeyToken(a))
	}
}

func TestParseSubjectAcceptsHashedTokens(t *testing.T) {
	long := strings.Repeat("n", 4100)
	in := Subject{Prefix: "kube", Cluster: "prod", Group: "rbac.authorization.k8s.io", Version: "v1",
		Resource: "rolebindings", Namespace: "default", Name: long, Type: Added}
	s := in.String()
	got, err := ParseSubject("kube", s)
	if err != nil {
		t.Fatalf("ParseSubject(%q): got error %v, want nil", s, err)
	}
	if got.Exact() {
		t.Fatalf("ParseSubject: got an exact Subject, want the name's digest set")
	}
	if got.Digests != (Digests{Name: Digest(long)}) {
		t.Errorf("Digests: got %+v, want only Name set to Digest(name)", got.Digests)
	}
	if !strings.HasPrefix(long, got.Name) || len(got.Name) != MaxTokenLen-len(hashMarker)-DigestLen {
		t.Errorf("Name: got %d bytes that are not the readable start of the name", len(got.Name))
	}
	if back := got.String(); back != s {
		t.Errorf("String of the parsed subject: got %q, want %q", back, s)
	}
	if f := (Filter{Prefix: "kube", AnyGroup: true, Name: long}).String(); !strings.HasSuffix(f, "."+SubjectToken(long)+".*") {
		t.Errorf("Filter on the exact long name: got %q, want the hashed token %q", f, SubjectToken(long))
	}
}

func TestParseSubjectRejectsMalformedHashedTokens(t *testing.T) {
	start := strings.Repeat("n", MaxTokenLen-len(hashMarker)-DigestLen)
	digest := Digest("x")
	tests := []struct {
		name string
		tok  string
	}{
		{name: "start too short", tok: "n~~" + digest},
		{name: "start too long", tok: start + "nnn~~" + digest},
		{name: "digest too short", tok: start + "~~" + digest[:10]},
		{name: "digest upper-case", tok: start + "~~" + strings.ToUpper(digest)},
		{name: "start not canonical", tok: "~61" + start[3:] + "~~" + digest},
		{name: "plain token over the bound", tok: strings.Repeat("n", MaxTokenLen+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := "kube.prod.core.v1.rolebindings.default." + tt.tok + ".added"
			if _, err := ParseSubject("kube", s); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("ParseSubject: got %v, want an error wrapping %v", err, ErrInvalidToken)
			}
		})
	}
}

func TestValidatePrefixBoundsLength(t *testing.T) {
	if err := ValidatePrefix(strings.Repeat("k", MaxPrefixLen)); err != nil {
		t.Errorf("ValidatePrefix of %d bytes: got %v, want nil", MaxPrefixLen, err)
	}
	if err := ValidatePrefix(strings.Repeat("k", MaxPrefixLen+1)); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("ValidatePrefix of %d bytes: got %v, want an error wrapping %v", MaxPrefixLen+1, err, ErrInvalidPrefix)
	}
}

func TestKeyTokenKeepsShortValuesAndHashesLongOnes(t *testing.T) {
	if got, want := KeyToken(dnsSubdomain), EncodeKeyToken(dnsSubdomain); got != want {
		t.Errorf("KeyToken of the longest DNS subdomain: got %q, want it in full %q", got, want)
	}
	long := strings.Repeat(":", 400)
	tok := KeyToken(long)
	if len(tok) > MaxKeyTokenLen || !kvKeyRe.MatchString(tok) {
		t.Fatalf("KeyToken: got %q (%d bytes), want a key token of at most %d bytes", tok, len(tok), MaxKeyTokenLen)
	}
	if want := strings.Repeat("=3A", 148) + "==" + Digest(long); tok != want {
		t.Errorf("KeyToken: got %q, want %q", tok, want)
	}
	if !IsHashedKeyToken(tok) || IsHashedKeyToken(KeyToken(dnsSubdomain)) {
		t.Errorf("IsHashedKeyToken: wrong for the hashed %q or the plain token", tok)
	}
	if _, err := DecodeKeyToken(tok); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("DecodeKeyToken(hashed): got %v, want an error wrapping %v", err, ErrInvalidToken)
	}
}

func TestMirrorKeyKeepsPlaceholdersApart(t *testing.T) {
	tests := []struct {
		name string
		a, b [5]string
	}{
		{name: "group literally core and the core group", a: [5]string{"c", "core", "r", "ns", "n"}, b: [5]string{"c", "", "r", "ns", "n"}},
		{name: "namespace literally _ and cluster-scoped", a: [5]string{"c", "g", "r", "_", "n"}, b: [5]string{"c", "g", "r", "", "n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka := MirrorKey(tt.a[0], schema.GroupResource{Group: tt.a[1], Resource: tt.a[2]}, tt.a[3], tt.a[4])
			kb := MirrorKey(tt.b[0], schema.GroupResource{Group: tt.b[1], Resource: tt.b[2]}, tt.b[3], tt.b[4])
			if ka == kb {
				t.Fatalf("MirrorKey: got %q for both, want distinct keys", ka)
			}
		})
	}
	long := strings.Repeat("n", 4100)
	k := MirrorKey("prod", schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, "default", long)
	if !kvKeyRe.MatchString(k) || !strings.HasSuffix(k, "."+KeyToken(long)) {
		t.Errorf("MirrorKey of a long name: got %q, want a valid key ending with the hashed token", k)
	}
	got, err := MirrorFilter("prod", schema.GroupResource{Resource: "configmaps"}, long)
	if want := "prod.core.configmaps." + KeyToken(long) + ".*"; err != nil || got != want {
		t.Errorf("MirrorFilter on a long namespace: got %q, %v, want %q", got, err, want)
	}
}

// TestLongestSubjectPublishes publishes an event whose subject is MaxSubjectLen long (the
// longest prefix, every field hashed, the longest type, a derived event of the longest name) through a real nats-server, with
// the JetStream reply inbox the relay's publishes carry: the server must store it and keep
// the connection.
func TestLongestSubjectPublishes(t *testing.T) {
	// Just over MaxTokenLen: the other headers repeat these values in full.
	long := strings.Repeat("v", MaxTokenLen)
	prefix := wirePrefix + "." + strings.Repeat("p", MaxPrefixLen-len(wirePrefix)-1)
	m := Meta{Cluster: long + "c", Group: long + "g", Version: long + "v", Resource: long + "r", Kind: "K",
		Namespace: long + "n", Name: long + "x", UID: "u", ResourceVersion: "1", Type: Modified, Origin: Live,
		Derived: strings.Repeat("d", MaxDerivedNameLen)}
	s := m.Subject(prefix).String()
	if len(s) != MaxSubjectLen {
		t.Fatalf("subject: got %d bytes, want MaxSubjectLen %d", len(s), MaxSubjectLen)
	}
	got := throughNATS(t, &nats.Msg{Subject: s, Header: m.Header(), Data: []byte("{}")})
	back, err := MetaFromHeader(got.Header)
	if err != nil {
		t.Fatalf("MetaFromHeader: %v", err)
	}
	if back != m {
		t.Errorf("MetaFromHeader: got %+v, want %+v", back, m)
	}
}

// FuzzSubjectTokenThroughNATS puts an arbitrary value in each field of an event, publishes
// it through a real nats-server and reads it back: the subject must be bounded and parse,
// the headers must give the exact value, and a hashed token must name the value by its
// digest and never read as a plain token.
func FuzzSubjectTokenThroughNATS(f *testing.F) {
	for i, s := range append(trickyStrings, " lead", "trail ", "a\nb", "a\r\nb", "日本語", strings.Repeat("x", 4100),
		strings.Repeat(".", 300), strings.Repeat("~", 200), dnsSubdomain, strings.Repeat("é", 300)) {
		f.Add(s, uint8(i))
	}
	f.Fuzz(func(t *testing.T, value string, field uint8) {
		m := wireMeta(int(field))
		fields := [...]*string{&m.Cluster, &m.Group, &m.Version, &m.Resource, &m.Namespace, &m.Name}
		*fields[int(field)%len(fields)] = value
		if m.Cluster == "" || m.Version == "" || m.Resource == "" || m.Name == "" {
			t.Skip("required field left empty")
		}
		sent := &nats.Msg{Subject: m.Subject(wirePrefix).String(), Header: m.Header(), Data: []byte("{}")}
		if len(sent.Subject) > MaxSubjectLen {
			t.Fatalf("subject of %d bytes: longer than MaxSubjectLen %d", len(sent.Subject), MaxSubjectLen)
		}
		got := throughNATS(t, sent)

		back, err := MetaFromHeader(got.Header)
		if err != nil {
			t.Fatalf("MetaFromHeader: got error %v, want nil", err)
		}
		if back != m {
			t.Fatalf("MetaFromHeader: got %+v, want %+v", back, m)
		}
		s, err := ParseSubject(wirePrefix, got.Subject)
		if err != nil {
			t.Fatalf("ParseSubject(%q): got error %v, want nil", got.Subject, err)
		}
		if s.String() != got.Subject {
			t.Fatalf("String of the parsed subject: got %q, want %q", s.String(), got.Subject)
		}
		parsed := [...]struct{ value, digest string }{
			{s.Cluster, s.Digests.Cluster}, {s.Group, s.Digests.Group}, {s.Version, s.Digests.Version},
			{s.Resource, s.Digests.Resource}, {s.Namespace, s.Digests.Namespace}, {s.Name, s.Digests.Name},
		}
		for i, p := range parsed {
			full := *fields[i]
			switch {
			case p.digest == "" && p.value != full:
				t.Fatalf("field %d: parsed %q, want %q", i, p.value, full)
			case p.digest != "" && (p.digest != Digest(full) || !strings.HasPrefix(full, p.value)):
				t.Fatalf("field %d: hashed token of %q does not name the value", i, full)
			case p.digest != "" && len(EncodeToken(full)) <= MaxTokenLen:
				t.Fatalf("field %d: %q fits MaxTokenLen but was hashed", i, full)
			}
		}
	})
}

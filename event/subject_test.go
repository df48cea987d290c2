package event

import (
	"errors"
	"strings"
	"testing"
)

// deployment is a namespaced object of a named group.
var deployment = Subject{
	Prefix: "kube", Cluster: "prod", Group: "apps", Version: "v1",
	Resource: "deployments", Namespace: "default", Name: "web", Type: Modified,
}

func TestSubjectString(t *testing.T) {
	tests := []struct {
		name string
		in   Subject
		want string
	}{
		{name: "namespaced object in named group", in: deployment, want: "kube.prod.apps.v1.deployments.default.web.modified"},
		{
			name: "core group and cluster-scoped",
			in:   Subject{Prefix: "kube", Cluster: "prod", Version: "v1", Resource: "namespaces", Name: "kube-system", Type: Added},
			want: "kube.prod.core.v1.namespaces._.kube-system.added",
		},
		{
			name: "group literally core",
			in:   Subject{Prefix: "kube", Cluster: "prod", Group: "core", Version: "v1", Resource: "things", Name: "a", Type: Added},
			want: "kube.prod.~63ore.v1.things._.a.added",
		},
		{
			name: "namespace literally underscore",
			in:   Subject{Prefix: "kube", Cluster: "prod", Version: "v1", Resource: "pods", Namespace: "_", Name: "a", Type: Deleted},
			want: "kube.prod.core.v1.pods.~5F.a.deleted",
		},
		{
			name: "dotted group and name, multi-token prefix",
			in: Subject{Prefix: "org.k8s", Cluster: "eu-1", Group: "networking.k8s.io", Version: "v1",
				Resource: "ingresses", Namespace: "web", Name: "kube-root-ca.crt", Type: Deleted},
			want: "org.k8s.eu-1.networking~2Ek8s~2Eio.v1.ingresses.web.kube-root-ca~2Ecrt.deleted",
		},
		{
			name: "colon name stays",
			in: Subject{Prefix: "kube", Cluster: "prod", Group: "rbac.authorization.k8s.io", Version: "v1",
				Resource: "clusterroles", Name: "system:controller:foo", Type: Added},
			want: "kube.prod.rbac~2Eauthorization~2Ek8s~2Eio.v1.clusterroles._.system:controller:foo.added",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.String()
			if got != tt.want {
				t.Fatalf("String(): got %q, want %q", got, tt.want)
			}
			back, err := ParseSubject(tt.in.Prefix, got)
			if err != nil {
				t.Fatalf("ParseSubject(%q, %q): got error %v, want nil", tt.in.Prefix, got, err)
			}
			if back != tt.in {
				t.Errorf("ParseSubject(%q, %q): got %+v, want %+v", tt.in.Prefix, got, back, tt.in)
			}
		})
	}
}

func TestParseSubjectErrors(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		subject string
		wantIs  []error
	}{
		{name: "wrong prefix", prefix: "kube", subject: "other.prod.apps.v1.deployments.default.web.added", wantIs: []error{ErrInvalidSubject}},
		{name: "prefix is only a string prefix", prefix: "kube", subject: "kubex.prod.apps.v1.deployments.default.web.added", wantIs: []error{ErrInvalidSubject}},
		{name: "invalid prefix argument", prefix: "kube.*", subject: "kube.*.prod.apps.v1.deployments.default.web.added", wantIs: []error{ErrInvalidSubject, ErrInvalidPrefix}},
		{name: "too few tokens", prefix: "kube", subject: "kube.prod.apps.v1.deployments.default.added", wantIs: []error{ErrInvalidSubject}},
		{name: "too many tokens", prefix: "kube", subject: "kube.prod.apps.v1.deployments.default.web.x.added", wantIs: []error{ErrInvalidSubject}},
		{name: "subject is only the prefix", prefix: "kube", subject: "kube", wantIs: []error{ErrInvalidSubject}},
		{name: "bad type", prefix: "kube", subject: "kube.prod.apps.v1.deployments.default.web.bookmark", wantIs: []error{ErrInvalidSubject, ErrInvalidType}},
		{name: "wildcard type", prefix: "kube", subject: "kube.prod.apps.v1.deployments.default.web.*", wantIs: []error{ErrInvalidSubject, ErrInvalidType}},
		{name: "bad escape in name", prefix: "kube", subject: "kube.prod.apps.v1.deployments.default.a~2e.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
		{name: "truncated escape in cluster", prefix: "kube", subject: "kube.prod~.apps.v1.deployments.default.web.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
		{name: "non-canonical escape in resource", prefix: "kube", subject: "kube.prod.apps.v1.deploy~6Dents.default.web.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
		{name: "empty token", prefix: "kube", subject: "kube.prod..v1.deployments.default.web.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
		{name: "wildcard in name", prefix: "kube", subject: "kube.prod.apps.v1.deployments.default.*.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
		{name: "empty-value token for group", prefix: "kube", subject: "kube.prod.~.v1.deployments.default.web.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
		{name: "empty-value token for namespace", prefix: "kube", subject: "kube.prod.apps.v1.deployments.~.web.added", wantIs: []error{ErrInvalidSubject, ErrInvalidToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSubject(tt.prefix, tt.subject)
			if err == nil {
				t.Fatalf("ParseSubject(%q, %q): got %+v, nil, want an error", tt.prefix, tt.subject, got)
			}
			for _, want := range tt.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("ParseSubject(%q, %q): got error %v, want one wrapping %v", tt.prefix, tt.subject, err, want)
				}
			}
		})
	}
}

func TestParseSubjectEmptyFields(t *testing.T) {
	in := Subject{Prefix: "kube", Type: Added}
	s := in.String()
	if want := "kube.~.core.~.~._.~.added"; s != want {
		t.Fatalf("String(): got %q, want %q", s, want)
	}
	got, err := ParseSubject("kube", s)
	if err != nil || got != in {
		t.Fatalf("ParseSubject(%q): got %+v, %v, want %+v, nil", s, got, err, in)
	}
}

func TestSubjectValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Subject)
		wantIs []error
	}{
		{name: "valid", mutate: func(*Subject) {}},
		{name: "core and cluster-scoped are valid", mutate: func(s *Subject) { s.Group, s.Namespace = "", "" }},
		{name: "bad prefix", mutate: func(s *Subject) { s.Prefix = "a..b" }, wantIs: []error{ErrInvalidPrefix}},
		{name: "bad type", mutate: func(s *Subject) { s.Type = "ADDED" }, wantIs: []error{ErrInvalidType}},
		{name: "empty cluster", mutate: func(s *Subject) { s.Cluster = "" }, wantIs: []error{ErrInvalidSubject}},
		{name: "empty version", mutate: func(s *Subject) { s.Version = "" }, wantIs: []error{ErrInvalidSubject}},
		{name: "empty resource", mutate: func(s *Subject) { s.Resource = "" }, wantIs: []error{ErrInvalidSubject}},
		{name: "empty name", mutate: func(s *Subject) { s.Name = "" }, wantIs: []error{ErrInvalidSubject}},
		{name: "all problems reported", mutate: func(s *Subject) { s.Prefix, s.Type, s.Name = "", "", "" },
			wantIs: []error{ErrInvalidPrefix, ErrInvalidType, ErrInvalidSubject}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := deployment
			tt.mutate(&s)
			err := s.Validate()
			if len(tt.wantIs) == 0 {
				if err != nil {
					t.Fatalf("Validate(): got %v, want nil", err)
				}
				return
			}
			for _, want := range tt.wantIs {
				if !errors.Is(err, want) {
					t.Errorf("Validate(): got %v, want an error wrapping %v", err, want)
				}
			}
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		wantErr bool
	}{
		{name: "one token", prefix: "kube"},
		{name: "several tokens", prefix: "org.team.kube"},
		{name: "punctuation", prefix: "k8s-events_v1:x"},
		{name: "empty", prefix: "", wantErr: true},
		{name: "empty token in middle", prefix: "a..b", wantErr: true},
		{name: "leading dot", prefix: ".kube", wantErr: true},
		{name: "trailing dot", prefix: "kube.", wantErr: true},
		{name: "star", prefix: "kube.*", wantErr: true},
		{name: "tail wildcard", prefix: "kube.>", wantErr: true},
		{name: "star inside token", prefix: "ku*be", wantErr: true},
		{name: "space", prefix: "ku be", wantErr: true},
		{name: "escape byte", prefix: "ku~be", wantErr: true},
		{name: "non-ASCII", prefix: "kübe", wantErr: true},
		{name: "NATS system subject", prefix: "$JS", wantErr: true},
		{name: "dollar later is fine", prefix: "kube.$x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePrefix(tt.prefix)
			if tt.wantErr != (err != nil) {
				t.Fatalf("ValidatePrefix(%q): got %v, want error %v", tt.prefix, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidPrefix) {
				t.Errorf("ValidatePrefix(%q): got %v, want an error wrapping %v", tt.prefix, err, ErrInvalidPrefix)
			}
		})
	}
}

func TestStreamSubject(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		cluster string
		want    string
	}{
		{name: "plain", prefix: "kube", cluster: "prod", want: "kube.prod.>"},
		{name: "dotted cluster is encoded", prefix: "org.kube", cluster: "eu.west", want: "org.kube.eu~2Ewest.>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StreamSubject(tt.prefix, tt.cluster); got != tt.want {
				t.Errorf("StreamSubject(%q, %q): got %q, want %q", tt.prefix, tt.cluster, got, tt.want)
			}
		})
	}
}

// FuzzSubjectRoundTrip checks that every Subject with a valid prefix and
// type survives String then ParseSubject, that every token after the prefix
// is a valid NATS token, and that any subject ParseSubject accepts is
// canonical (String gives it back).
func FuzzSubjectRoundTrip(f *testing.F) {
	for i, s := range trickyStrings {
		// Rotate the tricky strings through every field.
		n := len(trickyStrings)
		f.Add("kube", s, trickyStrings[(i+1)%n], trickyStrings[(i+2)%n], trickyStrings[(i+3)%n],
			trickyStrings[(i+4)%n], trickyStrings[(i+5)%n], uint8(i), "kube.prod.core.v1.pods._.a.added")
	}
	f.Add("a.b", "prod", "core", "v1", "pods", "_", "web", uint8(0), "a.b.prod.~63ore.v1.pods.~5F.web.deleted")
	f.Add("kube", "prod", "", "v1", "rolebindings", "ns", strings.Repeat("n", 4100), uint8(1), "kube.prod.core.v1.pods._."+strings.Repeat("n", 446)+"~~"+Digest("x")+".added")
	f.Add("kube", "prod", "", "v1", "pods", "ns", "web", uint8(0x80), "kube.prod.core.v1.pods.ns.web.modified.derived.ready")
	f.Add("kube", "prod", "", "v1", "pods", "ns", "web", uint8(0x81), "kube.prod.core.v1.pods.ns.web.modified.derived.Ready")
	f.Add("kube", "prod", "", "v1", "pods", "ns", "web", uint8(0x82), "kube.prod.core.v1.pods.ns.web.modified.derived")
	f.Add("kube", "prod", "", "v1", "pods", "ns", "web", uint8(0x83), "kube.prod.core.v1.pods.ns.web.modified.derived.added")
	types := [...]Type{Added, Modified, Deleted}
	// The high bit of typ makes the event a derived one, named from this list.
	derived := [...]string{"ready", "a", "pod-ready-2", strings.Repeat("x", MaxDerivedNameLen)}
	f.Fuzz(func(t *testing.T, prefix, cluster, group, version, resource, namespace, name string, typ uint8, raw string) {
		if ValidatePrefix(prefix) != nil {
			prefix = "kube"
		}
		in := Subject{
			Prefix: prefix, Cluster: cluster, Group: group, Version: version, Resource: resource,
			Namespace: namespace, Name: name, Type: types[int(typ&0x7f)%len(types)],
		}
		wantToks := tokensAfterPrefix
		if typ&0x80 != 0 {
			in.Derived = derived[int(typ&0x7f)%len(derived)]
			wantToks += 2
		}
		s := in.String()
		rest, ok := strings.CutPrefix(s, prefix+".")
		if !ok {
			t.Fatalf("String(): got %q, want prefix %q", s, prefix+".")
		}
		toks := strings.Split(rest, ".")
		if len(toks) != wantToks {
			t.Fatalf("String(): got %d tokens after prefix in %q, want %d", len(toks), s, wantToks)
		}
		if len(s) > MaxSubjectLen && len(prefix) <= MaxPrefixLen {
			t.Fatalf("String(): %d bytes, longer than MaxSubjectLen %d", len(s), MaxSubjectLen)
		}
		for _, tok := range toks {
			checkNATSToken(t, tok)
		}
		got, err := ParseSubject(prefix, s)
		if err != nil {
			t.Fatalf("ParseSubject(%q, %q): got error %v, want nil", prefix, s, err)
		}
		if !got.Exact() {
			// A value too long for a token: the subject holds its start and digest.
			if back := got.String(); back != s {
				t.Fatalf("String() of the hashed ParseSubject(%q, %q): got %q", prefix, s, back)
			}
			if got.Digests.Name != "" && got.Digests.Name != Digest(in.Name) {
				t.Fatalf("ParseSubject(%q, %q): name digest %q, want Digest(name)", prefix, s, got.Digests.Name)
			}
		} else if got != in {
			t.Fatalf("ParseSubject(%q, %q): got %+v, want %+v", prefix, s, got, in)
		}

		// The raw input read as a subject.
		parsed, err := ParseSubject(prefix, raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidSubject) {
				t.Fatalf("ParseSubject(%q, %q): got error %v, want one wrapping %v", prefix, raw, err, ErrInvalidSubject)
			}
			return
		}
		if back := parsed.String(); back != raw {
			t.Fatalf("String() of ParseSubject(%q, %q): got %q, want %q", prefix, raw, back, raw)
		}
	})
}

func TestDerivedSubjectsParseAndStayApartFromOrdinaryOnes(t *testing.T) {
	in := Subject{Prefix: "kube", Cluster: "prod", Version: "v1", Resource: "pods", Namespace: "ns", Name: "web",
		Type: Modified, Derived: "ready"}
	s := in.String()
	if want := "kube.prod.core.v1.pods.ns.web.modified.derived.ready"; s != want {
		t.Fatalf("String: got %q, want %q", s, want)
	}
	if got, err := ParseSubject("kube", s); err != nil || got != in {
		t.Fatalf("ParseSubject(%q): got %+v, %v, want %+v", s, got, err, in)
	}
	for _, bad := range []string{
		"kube.prod.core.v1.pods.ns.web.modified.derived",
		"kube.prod.core.v1.pods.ns.web.modified.derive.ready",
		"kube.prod.core.v1.pods.ns.web.modified.derived.Ready",
		"kube.prod.core.v1.pods.ns.web.modified.derived.deleted",
		"kube.prod.core.v1.pods.ns.web.modified.derived.ready.x",
		"kube.prod.core.v1.pods.ns.web.modified.derived." + strings.Repeat("a", MaxDerivedNameLen+1),
	} {
		if _, err := ParseSubject("kube", bad); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("ParseSubject(%q): got %v, want an error wrapping ErrInvalidSubject", bad, err)
		}
	}
	tests := []struct {
		name string
		f    Filter
		want string
	}{
		{"ordinary events only", Filter{Prefix: "kube", Resource: "pods"}, "kube.*.core.*.pods.*.*.*"},
		{"every derived event", Filter{Prefix: "kube", Resource: "pods", Derived: AllDerived}, "kube.*.core.*.pods.*.*.*.derived.*"},
		{"one derived event", Filter{Prefix: "kube", Resource: "pods", Derived: "ready"}, "kube.*.core.*.pods.*.*.*.derived.ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tt.f.String(); got != tt.want {
				t.Errorf("String: got %q, want %q", got, tt.want)
			}
		})
	}
	if err := (Filter{Prefix: "kube", Derived: "Ready"}).Validate(); err == nil {
		t.Errorf("Validate of a filter on derived event %q: got nil, want an error", "Ready")
	}
}

func TestDerivedHeadersRoundTripAndNameTheirChange(t *testing.T) {
	m := Meta{Cluster: "prod", Version: "v1", Resource: "pods", Kind: "Pod", Namespace: "ns", Name: "web",
		UID: "u1", ResourceVersion: "42", Type: Modified, Origin: Relist}
	change := m.ID()
	d := m
	d.Derived = "ready"
	h := d.Header()
	if got, want := h.Get(HeaderCEType), "io.kube-nats-relay.object.derived.ready"; got != want {
		t.Errorf("ce-type: got %q, want %q", got, want)
	}
	if got := h.Get(HeaderDerivedFrom); got != change {
		t.Errorf("k8s-derived-from: got %q, want the change's id %q", got, change)
	}
	if got, want := h.Get(HeaderMsgID), DerivedID(change, "ready"); got != want || got == change {
		t.Errorf("Nats-Msg-Id: got %q, want %q (not the change's)", got, want)
	}
	if other := (Meta{Cluster: "prod", Version: "v1", Resource: "pods", UID: "u1", ResourceVersion: "42", Type: Modified, Derived: "unready"}); other.ID() == d.ID() {
		t.Errorf("two derived events of one change share the id %q", d.ID())
	}
	back, err := MetaFromHeader(h)
	if err != nil || back != d {
		t.Fatalf("MetaFromHeader: got %+v, %v, want %+v", back, err, d)
	}
	if _, err := MetaFromHeader(m.Header()); err != nil {
		t.Fatalf("MetaFromHeader of the ordinary event: %v", err)
	}
	for _, tt := range []struct {
		name   string
		mutate func(h map[string][]string)
	}{
		{"derived-from of another change", func(h map[string][]string) {
			h[HeaderDerivedFrom] = []string{ID("prod", "", "pods", "u1", "43", Modified)}
		}},
		{"derived-from missing", func(h map[string][]string) { delete(h, HeaderDerivedFrom) }},
		{"id of another name", func(h map[string][]string) { h[HeaderCEType] = []string{CETypeDerivedPrefix + "unready"} }},
		{"bad name", func(h map[string][]string) { h[HeaderCEType] = []string{CETypeDerivedPrefix + "Ready"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := d.Header()
			tt.mutate(bad)
			if _, err := MetaFromHeader(bad); !errors.Is(err, ErrInvalidHeader) {
				t.Errorf("MetaFromHeader: got %v, want an error wrapping ErrInvalidHeader", err)
			}
		})
	}
	ordinary := m.Header()
	ordinary.Set(HeaderDerivedFrom, change)
	if _, err := MetaFromHeader(ordinary); !errors.Is(err, ErrInvalidHeader) {
		t.Errorf("MetaFromHeader of an ordinary event with k8s-derived-from: got %v, want an error", err)
	}
}

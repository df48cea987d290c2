package event

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// podMeta is a namespaced core-group object.
var podMeta = Meta{
	Cluster: "prod", Version: "v1", Resource: "pods", Kind: "Pod",
	Namespace: "default", Name: "web-0", UID: "0b7e1c2a-0000-4000-8000-000000000001",
	ResourceVersion: "42", Type: Added, Origin: Live,
	Time: time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("CET", 3600)),
}

// clusterRoleMeta is a cluster-scoped object of a dotted group.
var clusterRoleMeta = Meta{
	Cluster: "eu west", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles",
	Kind: "ClusterRole", Name: "system:controller:foo", UID: "u-2", ResourceVersion: "7",
	Type: Deleted, Origin: Relist,
}

// wireHeader writes h in the NATS header block format and parses it back
// with nats.DecodeHeadersMsg, as a subscriber would receive it.
func wireHeader(t *testing.T, h nats.Header) nats.Header {
	t.Helper()
	var b strings.Builder
	b.WriteString("NATS/1.0\r\n")
	for k, vs := range h {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	got, err := nats.DecodeHeadersMsg([]byte(b.String()))
	if err != nil {
		t.Fatalf("DecodeHeadersMsg: got error %v, want nil", err)
	}
	return got
}

func TestMetaHeader(t *testing.T) {
	tests := []struct {
		name   string
		in     Meta
		want   map[string]string
		absent []string
	}{
		{
			name: "namespaced core object",
			in:   podMeta,
			want: map[string]string{
				HeaderMsgID:           podMeta.ID(),
				HeaderCESpecVersion:   "1.0",
				HeaderCEID:            podMeta.ID(),
				HeaderCESource:        "kube-nats-relay://prod/core/v1/pods",
				HeaderCEType:          "io.kube-nats-relay.object.added",
				HeaderCESubject:       "default/web-0",
				HeaderCETime:          "2026-03-04T04:06:07.00000089Z",
				HeaderContentType:     "application/json",
				HeaderKind:            "Pod",
				HeaderAPIVersion:      "v1",
				HeaderGroup:           "",
				HeaderVersion:         "v1",
				HeaderResource:        "pods",
				HeaderNamespace:       "default",
				HeaderName:            "web-0",
				HeaderUID:             "0b7e1c2a-0000-4000-8000-000000000001",
				HeaderResourceVersion: "42",
				HeaderOrigin:          "live",
				HeaderCluster:         "prod",
			},
		},
		{
			name: "cluster-scoped object of a dotted group, unknown time",
			in:   clusterRoleMeta,
			want: map[string]string{
				// The URI escapes the space (%20); the header escapes the URI's "%" once more.
				HeaderCESource:   "kube-nats-relay://eu%2520west/rbac.authorization.k8s.io/v1/clusterroles",
				HeaderCEType:     "io.kube-nats-relay.object.deleted",
				HeaderCESubject:  "system:controller:foo",
				HeaderAPIVersion: "rbac.authorization.k8s.io/v1",
				HeaderNamespace:  "",
				HeaderOrigin:     "relist",
				HeaderCluster:    "eu%20west",
			},
			absent: []string{HeaderCETime, HeaderBodyOmitted, HeaderFinalStateUnknown},
		},
		{
			name: "group literally core",
			in:   Meta{Cluster: "c", Group: "core", Version: "v1", Resource: "things"},
			want: map[string]string{HeaderCESource: "kube-nats-relay://c/!core/v1/things", HeaderAPIVersion: "core/v1"},
		},
		{
			name: "name nats.go would trim or rewrite",
			in:   Meta{Cluster: "c", Version: "v1", Resource: "rolebindings", Namespace: "ns", Name: " lead\r\n%\"日"},
			want: map[string]string{
				HeaderCESubject: "ns/%20lead%0D%0A%25%22%E6%97%A5",
				HeaderName:      "%20lead%0D%0A%25%22%E6%97%A5",
				HeaderNamespace: "ns",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.in.Header()
			for name, want := range tt.want {
				vs, ok := h[name]
				if !ok || len(vs) != 1 {
					t.Errorf("header %q: got values %q, want exactly [%q]", name, vs, want)
					continue
				}
				if vs[0] != want {
					t.Errorf("header %q: got %q, want %q", name, vs[0], want)
				}
			}
			for _, name := range tt.absent {
				if vs, ok := h[name]; ok {
					t.Errorf("header %q: got %q, want absent", name, vs)
				}
			}
		})
	}
}

func TestMetaHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   Meta
	}{
		{name: "namespaced core object", in: podMeta},
		{name: "cluster-scoped object of a dotted group", in: clusterRoleMeta},
		{name: "initial sync modified", in: Meta{Cluster: "c", Group: "apps", Version: "v1", Resource: "deployments",
			Kind: "Deployment", Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "1", Type: Modified, Origin: InitialSync,
			Time: time.Unix(1700000000, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.in.Validate(); err != nil {
				t.Fatalf("Validate(): got %v, want nil", err)
			}
			got, err := MetaFromHeader(wireHeader(t, tt.in.Header()))
			if err != nil {
				t.Fatalf("MetaFromHeader: got error %v, want nil", err)
			}
			if !got.Time.Equal(tt.in.Time) {
				t.Errorf("Time: got %v, want %v", got.Time, tt.in.Time)
			}
			got.Time, tt.in.Time = time.Time{}, time.Time{}
			if got != tt.in {
				t.Errorf("MetaFromHeader: got %+v, want %+v", got, tt.in)
			}
		})
	}
}

func TestMetaFromHeaderOptional(t *testing.T) {
	tests := []struct {
		name   string
		delete string
	}{
		{name: "no Nats-Msg-Id", delete: HeaderMsgID},
		{name: "no ce-time", delete: HeaderCETime},
		{name: "no Content-Type", delete: HeaderContentType},
		{name: "no k8s-group for the core group", delete: HeaderGroup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := podMeta.Header()
			h.Del(tt.delete)
			if _, err := MetaFromHeader(h); err != nil {
				t.Errorf("MetaFromHeader without %q: got error %v, want nil", tt.delete, err)
			}
		})
	}
}

func TestMetaFromHeaderErrors(t *testing.T) {
	type test struct {
		name   string
		mutate func(nats.Header)
		header string // the header the error must name
	}
	var tests []test
	for _, name := range []string{
		HeaderCESpecVersion, HeaderCEID, HeaderCESource, HeaderCEType, HeaderCESubject, HeaderKind,
		HeaderAPIVersion, HeaderVersion, HeaderResource, HeaderName, HeaderUID, HeaderResourceVersion,
		HeaderOrigin, HeaderCluster,
	} {
		tests = append(tests,
			test{name: "missing " + name, mutate: func(h nats.Header) { h.Del(name) }, header: name},
			test{name: "empty " + name, mutate: func(h nats.Header) { h.Set(name, "") }, header: name},
		)
	}
	tests = append(tests, []test{
		{name: "repeated header", mutate: func(h nats.Header) { h.Add(HeaderUID, "other") }, header: HeaderUID},
		{name: "wrong specversion", mutate: func(h nats.Header) { h.Set(HeaderCESpecVersion, "0.3") }, header: HeaderCESpecVersion},
		{name: "foreign ce-type", mutate: func(h nats.Header) { h.Set(HeaderCEType, "com.example.added") }, header: HeaderCEType},
		{name: "unknown event type", mutate: func(h nats.Header) { h.Set(HeaderCEType, CETypePrefix+"bookmark") }, header: HeaderCEType},
		{name: "unknown origin", mutate: func(h nats.Header) { h.Set(HeaderOrigin, "replay") }, header: HeaderOrigin},
		{name: "bad time", mutate: func(h nats.Header) { h.Set(HeaderCETime, "yesterday") }, header: HeaderCETime},
		{name: "ce-id differs from derived id", mutate: func(h nats.Header) { h.Set(HeaderCEID, strings.Repeat("0", IDLen)) }, header: HeaderCEID},
		{name: "fact changed without id", mutate: func(h nats.Header) { h.Set(HeaderResourceVersion, "43") }, header: HeaderCEID},
		{name: "Nats-Msg-Id differs", mutate: func(h nats.Header) { h.Set(HeaderMsgID, strings.Repeat("0", IDLen)) }, header: HeaderMsgID},
		{name: "ce-source differs", mutate: func(h nats.Header) { h.Set(HeaderCESource, "kube-nats-relay://x/core/v1/pods") }, header: HeaderCESource},
		{name: "ce-subject differs", mutate: func(h nats.Header) { h.Set(HeaderCESubject, "web-0") }, header: HeaderCESubject},
		{name: "apiversion differs", mutate: func(h nats.Header) { h.Set(HeaderAPIVersion, "apps/v1") }, header: HeaderAPIVersion},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := podMeta.Header()
			tt.mutate(h)
			got, err := MetaFromHeader(h)
			if !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("MetaFromHeader: got %+v, error %v, want an error wrapping %v", got, err, ErrInvalidHeader)
			}
			if !strings.Contains(err.Error(), `"`+tt.header+`"`) {
				t.Errorf("MetaFromHeader: got error %q, want it to name header %q", err, tt.header)
			}
		})
	}
}

func TestMetaValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Meta)
		wantIs []error
	}{
		{name: "valid", mutate: func(*Meta) {}},
		{name: "no time is valid", mutate: func(m *Meta) { m.Time = time.Time{} }},
		{name: "empty uid", mutate: func(m *Meta) { m.UID = "" }, wantIs: []error{ErrInvalidMeta}},
		{name: "empty kind", mutate: func(m *Meta) { m.Kind = "" }, wantIs: []error{ErrInvalidMeta}},
		{name: "empty resourceVersion", mutate: func(m *Meta) { m.ResourceVersion = "" }, wantIs: []error{ErrInvalidMeta}},
		{name: "bad type", mutate: func(m *Meta) { m.Type = "" }, wantIs: []error{ErrInvalidMeta, ErrInvalidType}},
		{name: "bad origin", mutate: func(m *Meta) { m.Origin = "" }, wantIs: []error{ErrInvalidMeta, ErrInvalidOrigin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := podMeta
			tt.mutate(&m)
			err := m.Validate()
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

func TestMetaSubject(t *testing.T) {
	tests := []struct {
		name string
		in   Meta
		want string
	}{
		{name: "namespaced core object", in: podMeta, want: "kube.prod.core.v1.pods.default.web-0.added"},
		{name: "cluster-scoped", in: clusterRoleMeta,
			want: "kube.eu~20west.rbac~2Eauthorization~2Ek8s~2Eio.v1.clusterroles._.system:controller:foo.deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.in.Subject("kube")
			if got := s.String(); got != tt.want {
				t.Errorf("Subject(%q).String(): got %q, want %q", "kube", got, tt.want)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Subject(%q).Validate(): got %v, want nil", "kube", err)
			}
		})
	}
}

package consumer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// configMapMeta is a namespaced core-group object whose name needs escaping in subjects.
var configMapMeta = event.Meta{
	Cluster: "prod", Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
	Namespace: "kube-system", Name: "kube-root-ca.crt", UID: "7cffd25b-bcf0-4ca8-9d8a-857206456fd3",
	ResourceVersion: "215", Type: event.Modified, Origin: event.Live,
	Time: time.Date(2026, 11, 30, 5, 10, 21, 663638887, time.UTC),
}

// clusterRoleMeta is a cluster-scoped object of a dotted group, with no ce-time.
var clusterRoleMeta = event.Meta{
	Cluster: "prod", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles",
	Kind: "ClusterRole", Name: "system:controller:foo", UID: "u-2", ResourceVersion: "7",
	Type: event.Deleted, Origin: event.Relist,
}

const configMapBody = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt","namespace":"kube-system","uid":"7cffd25b-bcf0-4ca8-9d8a-857206456fd3","resourceVersion":"215"},"data":{"ca.crt":"x"}}`

// relayMsg returns the message the relay publishes for m under prefix, with body.
func relayMsg(prefix string, m event.Meta, body string) *nats.Msg {
	msg := &nats.Msg{Subject: m.Subject(prefix).String(), Header: m.Header()}
	if body != "" {
		msg.Data = []byte(body)
	}
	return msg
}

func TestDecodeMsg(t *testing.T) {
	tests := []struct {
		name   string
		msg    func() *nats.Msg
		prefix string
		meta   event.Meta
		object string
		// omitted and unknown are the expected BodyOmitted and FinalStateUnknown.
		omitted string
		unknown bool
	}{
		{
			name:   "namespaced object with a dotted name",
			msg:    func() *nats.Msg { return relayMsg("kube", configMapMeta, configMapBody) },
			prefix: "kube", meta: configMapMeta, object: configMapBody,
		},
		{
			name:   "multi-token prefix",
			msg:    func() *nats.Msg { return relayMsg("acme.kube", configMapMeta, configMapBody) },
			prefix: "acme.kube", meta: configMapMeta, object: configMapBody,
		},
		{
			name: "cluster-scoped inferred delete",
			msg: func() *nats.Msg {
				m := relayMsg("kube", clusterRoleMeta, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"system:controller:foo"}}`)
				m.Header.Set(event.HeaderFinalStateUnknown, "true")
				return m
			},
			prefix: "kube", meta: clusterRoleMeta,
			object:  `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"system:controller:foo"}}`,
			unknown: true,
		},
		{
			name: "body omitted for size",
			msg: func() *nats.Msg {
				m := relayMsg("kube", configMapMeta, "")
				m.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
				return m
			},
			prefix: "kube", meta: configMapMeta, omitted: event.BodyOmittedOversize,
		},
		{
			name:   "headers only",
			msg:    func() *nats.Msg { return relayMsg("kube", configMapMeta, "") },
			prefix: "kube", meta: configMapMeta,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := consumer.DecodeMsg(tt.msg())
			if err != nil {
				t.Fatalf("DecodeMsg: got error %v, want nil", err)
			}
			if !e.Meta.Time.Equal(tt.meta.Time) {
				t.Errorf("Time: got %v, want %v", e.Meta.Time, tt.meta.Time)
			}
			got := e.Meta
			got.Time = tt.meta.Time
			if got != tt.meta {
				t.Errorf("Meta: got %+v, want %+v", got, tt.meta)
			}
			if e.ID() != tt.meta.ID() {
				t.Errorf("ID: got %s, want %s", e.ID(), tt.meta.ID())
			}
			if e.Prefix != tt.prefix {
				t.Errorf("Prefix: got %q, want %q", e.Prefix, tt.prefix)
			}
			if got, want := e.Subject(e.Prefix).String(), tt.msg().Subject; got != want {
				t.Errorf("Subject(Prefix): got %q, want %q", got, want)
			}
			if string(e.Object) != tt.object {
				t.Errorf("Object: got %q, want %q", e.Object, tt.object)
			}
			if e.BodyOmitted != tt.omitted || e.FinalStateUnknown != tt.unknown {
				t.Errorf("BodyOmitted, FinalStateUnknown: got %q, %v, want %q, %v", e.BodyOmitted, e.FinalStateUnknown, tt.omitted, tt.unknown)
			}
			if e.Sequence != 0 || !e.Stored.IsZero() {
				t.Errorf("Sequence, Stored: got %d, %v, want 0 and zero for a core NATS message", e.Sequence, e.Stored)
			}
		})
	}
}

func TestDecodeMsgRejects(t *testing.T) {
	other := configMapMeta
	other.Name = "other"
	tests := []struct {
		name  string
		msg   func() *nats.Msg
		cause error
	}{
		{
			name: "subject of another object",
			msg: func() *nats.Msg {
				m := relayMsg("kube", configMapMeta, configMapBody)
				m.Subject = other.Subject("kube").String()
				return m
			},
			cause: event.ErrInvalidSubject,
		},
		{
			name: "subject of another type",
			msg: func() *nats.Msg {
				m := relayMsg("kube", configMapMeta, configMapBody)
				m.Subject = "kube.prod.core.v1.configmaps.kube-system.kube-root-ca~2Ecrt.added"
				return m
			},
			cause: event.ErrInvalidSubject,
		},
		{
			name: "subject without prefix",
			msg: func() *nats.Msg {
				m := relayMsg("kube", configMapMeta, configMapBody)
				m.Subject = m.Subject[len("kube."):]
				return m
			},
			cause: event.ErrInvalidSubject,
		},
		{
			name:  "reserved prefix",
			msg:   func() *nats.Msg { return relayMsg("$kube", configMapMeta, configMapBody) },
			cause: event.ErrInvalidPrefix,
		},
		{
			name: "missing header",
			msg: func() *nats.Msg {
				m := relayMsg("kube", configMapMeta, configMapBody)
				m.Header.Del(event.HeaderUID)
				return m
			},
			cause: event.ErrInvalidHeader,
		},
		{
			name: "id that does not match the facts",
			msg: func() *nats.Msg {
				m := relayMsg("kube", configMapMeta, configMapBody)
				m.Header.Set(event.HeaderResourceVersion, "216")
				return m
			},
			cause: event.ErrInvalidHeader,
		},
		{
			name: "no headers at all",
			msg: func() *nats.Msg {
				return &nats.Msg{Subject: configMapMeta.Subject("kube").String(), Data: []byte(configMapBody)}
			},
			cause: event.ErrInvalidHeader,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := consumer.DecodeMsg(tt.msg())
			if !errors.Is(err, consumer.ErrInvalidEvent) || !errors.Is(err, tt.cause) {
				t.Fatalf("DecodeMsg: got error %v, want one wrapping ErrInvalidEvent and %v", err, tt.cause)
			}
		})
	}
}

func TestDecodeRaw(t *testing.T) {
	stored := time.Date(2026, 11, 30, 5, 10, 22, 0, time.UTC)
	m := relayMsg("kube", configMapMeta, configMapBody)
	e, err := consumer.DecodeRaw(&jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 17, Header: m.Header, Data: m.Data, Time: stored})
	if err != nil {
		t.Fatalf("DecodeRaw: got error %v, want nil", err)
	}
	if e.Sequence != 17 || !e.Stored.Equal(stored) || e.Name != configMapMeta.Name {
		t.Errorf("DecodeRaw: got sequence %d, stored %v, name %q, want 17, %v, %q", e.Sequence, e.Stored, e.Name, stored, configMapMeta.Name)
	}
	if _, err := consumer.DecodeRaw(&jetstream.RawStreamMsg{Subject: "kube.x", Header: m.Header}); !errors.Is(err, consumer.ErrInvalidEvent) {
		t.Errorf("DecodeRaw of a foreign subject: got error %v, want ErrInvalidEvent", err)
	}
}

func TestDecodeDerivedEvent(t *testing.T) {
	d := configMapMeta
	d.Derived = "ready"
	e, err := consumer.DecodeMsg(relayMsg("kube", d, configMapBody))
	if err != nil {
		t.Fatalf("DecodeMsg: %v", err)
	}
	if e.Derived != "ready" || e.Type != event.Modified || e.ID() != event.DerivedID(configMapMeta.ID(), "ready") || e.Prefix != "kube" {
		t.Errorf("DecodeMsg: got derived %q type %q id %q prefix %q, want ready, modified, %q, kube",
			e.Derived, e.Type, e.ID(), e.Prefix, event.DerivedID(configMapMeta.ID(), "ready"))
	}
	if consumer.KeyOf(e) == consumer.KeyOf(consumer.Event{Meta: configMapMeta}) {
		t.Errorf("KeyOf: a derived event shares its object's key %v", consumer.KeyOf(e))
	}
	// The derived event's headers on the change's own subject do not decode.
	msg := relayMsg("kube", d, configMapBody)
	msg.Subject = configMapMeta.Subject("kube").String()
	if _, err := consumer.DecodeMsg(msg); !errors.Is(err, consumer.ErrInvalidEvent) {
		t.Errorf("DecodeMsg of derived headers on an ordinary subject: got %v, want ErrInvalidEvent", err)
	}
}

func TestSubjectsSelectDerivedEventsApart(t *testing.T) {
	pods := event.Filter{Prefix: "kube", Resource: "pods"}
	ready := pods
	ready.Derived = "ready"
	all := pods
	all.Derived = event.AllDerived
	got, err := consumer.Subjects(pods, ready, all)
	if err != nil {
		t.Fatalf("Subjects: %v", err)
	}
	want := []string{"kube.*.core.*.pods.*.*.*", "kube.*.core.*.pods.*.*.*.derived.*"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Subjects: got %q, want %q (ordinary and derived never overlap; ready is within all)", got, want)
	}
}

package event_test

import (
	"testing"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// The relay builds a subject, an id and the headers for every event it publishes; consumers
// parse them for every event they receive. These benchmarks measure that per-event cost with
// allocation counts (`make bench` runs them with -benchmem and reports medians in
// docs/benchmarks.md).

// benchMeta is a typical event: a ConfigMap of the core group whose name needs escaping, as
// kube-root-ca.crt does in every namespace.
var benchMeta = event.Meta{
	Cluster:         "prod",
	Group:           "",
	Version:         "v1",
	Resource:        "configmaps",
	Kind:            "ConfigMap",
	Namespace:       "payments",
	Name:            "kube-root-ca.crt",
	UID:             "9632f75e-287a-4656-ac9b-9713367e3a9d",
	ResourceVersion: "12345678",
	Type:            event.Modified,
	Origin:          event.Live,
	Time:            time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
}

// sinks keep the compiler from removing the measured calls.
var (
	sinkString string
	sinkMeta   event.Meta
	sinkLen    int
)

func BenchmarkEncodeToken(b *testing.B) {
	for _, bc := range []struct{ name, value string }{
		{"plain", "web-frontend-7d4b9c"},       // the common case: copied, no allocation
		{"dotted", "kube-root-ca.crt"},         // one escape
		{"group", "networking.k8s.io"},         // several escapes
		{"utf8", "日本-config"},                  // multi-byte: every byte escaped
		{"long-plain", string(make253Plain())}, // the longest DNS subdomain name
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkString = event.EncodeToken(bc.value)
			}
		})
	}
}

func BenchmarkDecodeToken(b *testing.B) {
	for _, bc := range []struct{ name, token string }{
		{"plain", "web-frontend-7d4b9c"},
		{"dotted", "kube-root-ca~2Ecrt"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := event.DecodeToken(bc.token)
				if err != nil {
					b.Fatal(err)
				}
				sinkString = s
			}
		})
	}
}

func BenchmarkSubjectString(b *testing.B) {
	for _, bc := range []struct {
		name string
		meta event.Meta
	}{
		{"plain", withName(benchMeta, "web-frontend")},
		{"escaped", benchMeta},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkString = bc.meta.Subject("kube").String()
			}
		})
	}
}

func BenchmarkParseSubject(b *testing.B) {
	subject := benchMeta.Subject("kube").String()
	b.ReportAllocs()
	for b.Loop() {
		s, err := event.ParseSubject("kube", subject)
		if err != nil {
			b.Fatal(err)
		}
		sinkString = s.Name
	}
}

func BenchmarkID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkString = event.ID(benchMeta.Cluster, benchMeta.Group, benchMeta.Resource, benchMeta.UID,
			benchMeta.ResourceVersion, benchMeta.Type)
	}
}

func BenchmarkMetaHeader(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkLen = len(benchMeta.Header())
	}
}

func BenchmarkMetaFromHeader(b *testing.B) {
	h := benchMeta.Header()
	b.ReportAllocs()
	for b.Loop() {
		m, err := event.MetaFromHeader(h)
		if err != nil {
			b.Fatal(err)
		}
		sinkMeta = m
	}
}

func withName(m event.Meta, name string) event.Meta {
	m.Name = name
	return m
}

// make253Plain returns a 253-byte name of safe bytes: the longest a Kubernetes object name
// can be (DNS subdomain).
func make253Plain() []byte {
	b := make([]byte, 253)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

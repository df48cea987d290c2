package consumer_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// ceHeaderPrefix starts the header of every CloudEvents attribute in binary content mode
// (NATS protocol binding, section 3.1.3.1).
const ceHeaderPrefix = "ce-"

// ceSpecs resolves prefixed header names to attributes of the specversion the message states.
var ceSpecs = spec.WithPrefix(ceHeaderPrefix)

// natsBinaryMessage reads a NATS message in CloudEvents binary content mode for the
// CloudEvents Go SDK. The SDK's own NATS JetStream binding (module
// github.com/cloudevents/sdk-go/protocol/nats_jetstream/v3) cannot be fetched here; this is
// the same reading: each ce- header is an attribute (or an extension), the content type
// header is datacontenttype, the payload is the data. Unlike that binding, header names are
// matched case-insensitively, as the NATS binding requires; the relay writes "Content-Type"
// and that binding looks only for "content-type".
type natsBinaryMessage struct {
	header nats.Header
	data   []byte
}

var (
	_ binding.Message               = natsBinaryMessage{}
	_ binding.MessageMetadataReader = natsBinaryMessage{}
)

func (m natsBinaryMessage) ReadEncoding() binding.Encoding {
	if m.get(ceSpecs.PrefixedSpecVersionName()) != "" {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

func (m natsBinaryMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m natsBinaryMessage) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	version := ceSpecs.Version(m.get(ceSpecs.PrefixedSpecVersionName()))
	if version == nil {
		return binding.ErrNotBinary
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	for name, values := range m.header {
		lower := strings.ToLower(name)
		var err error
		switch {
		case strings.HasPrefix(lower, ceHeaderPrefix):
			v, perr := url.PathUnescape(values[0]) // one round of percent-decoding (3.1.3.2)
			if perr != nil {
				return perr
			}
			if attr := version.Attribute(lower); attr != nil {
				err = w.SetAttribute(attr, v)
			} else {
				err = w.SetExtension(strings.TrimPrefix(lower, ceHeaderPrefix), v)
			}
		case lower == "content-type":
			err = w.SetAttribute(version.AttributeFromKind(spec.DataContentType), values[0])
		}
		if err != nil {
			return err
		}
	}
	if len(m.data) > 0 {
		if err := w.SetData(bytes.NewReader(m.data)); err != nil {
			return err
		}
	}
	return w.End(ctx)
}

func (m natsBinaryMessage) Finish(error) error { return nil }

// GetAttribute and GetExtension make the message a binding.MessageMetadataReader, which the
// SDK requires of binary messages.
func (m natsBinaryMessage) GetAttribute(kind spec.Kind) (spec.Attribute, any) {
	version := ceSpecs.Version(m.get(ceSpecs.PrefixedSpecVersionName()))
	if version == nil {
		return nil, nil
	}
	attr := version.AttributeFromKind(kind)
	if attr == nil {
		return nil, nil
	}
	v, _ := url.PathUnescape(m.get(attr.PrefixedName()))
	if v == "" && kind == spec.DataContentType {
		v = m.get("content-type")
	}
	if v == "" {
		return attr, nil
	}
	return attr, v
}

func (m natsBinaryMessage) GetExtension(name string) any {
	if v, _ := url.PathUnescape(m.get(ceHeaderPrefix + name)); v != "" {
		return v
	}
	return nil
}

// get returns the first value of the header named name in any case.
func (m natsBinaryMessage) get(name string) string {
	for k, vs := range m.header {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// checkCloudEvent decodes a relay message with the CloudEvents SDK and compares every
// attribute with the contract: what e (decoded by this package) says and how docs/events.md
// derives each attribute.
func checkCloudEvent(t *testing.T, subject string, h nats.Header, data []byte, e consumer.Event) {
	t.Helper()
	ce, err := binding.ToEvent(context.Background(), natsBinaryMessage{header: h, data: data})
	if err != nil {
		t.Fatalf("%s: CloudEvents SDK: got error %v, want an event", subject, err)
	}
	if err := ce.Validate(); err != nil {
		t.Errorf("%s: CloudEvents SDK validation: %v", subject, err)
	}
	wantSource := "kube-nats-relay://" + e.Cluster + "/" + map[bool]string{true: "core", false: e.Group}[e.Group == ""] +
		"/" + e.Version + "/" + e.Resource
	wantSubject := e.Name
	if e.Namespace != "" {
		wantSubject = e.Namespace + "/" + e.Name
	}
	for _, c := range []struct{ attr, got, want string }{
		{"specversion", ce.SpecVersion(), "1.0"},
		{"id", ce.ID(), e.ID()},
		{"id (Nats-Msg-Id)", ce.ID(), h.Get(event.HeaderMsgID)},
		{"source", ce.Source(), wantSource},
		{"type", ce.Type(), "io.kube-nats-relay.object." + string(e.Type)},
		// The SDK trims whitespace off the subject (EventContextV1.SetSubject); the header
		// carries it, and k8s-name gives the name exactly.
		{"subject", ce.Subject(), strings.TrimSpace(wantSubject)},
		{"datacontenttype", ce.DataContentType(), "application/json"},
		{"data", string(ce.Data()), string(e.Object)},
		{"dataschema", ce.DataSchema(), e.DataSchema},
	} {
		if c.got != c.want {
			t.Errorf("%s: CloudEvents %s: got %q, want %q", subject, c.attr, c.got, c.want)
		}
	}
	if e.Time.IsZero() {
		t.Errorf("%s: no ce-time: the relay always knows when it observed a change", subject)
	}
	if !ce.Time().Equal(e.Time) {
		t.Errorf("%s: CloudEvents time: got %v, want %v", subject, ce.Time(), e.Time)
	}
	if exts := ce.Extensions(); len(exts) != 0 {
		t.Errorf("%s: CloudEvents extensions: got %v, want none (the k8s-* headers are not ce- attributes)", subject, exts)
	}
}

func TestCloudEventsSDKReadsWireMessage(t *testing.T) {
	// Through the NATS header wire format, as a subscriber receives it.
	m := relayMsg("kube", configMapMeta, configMapBody)
	var wire bytes.Buffer
	wire.WriteString("NATS/1.0\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			wire.WriteString(k + ": " + v + "\r\n")
		}
	}
	wire.WriteString("\r\n")
	h, err := nats.DecodeHeadersMsg(wire.Bytes())
	if err != nil {
		t.Fatalf("decode headers: %v", err)
	}
	e, err := consumer.DecodeMsg(&nats.Msg{Subject: m.Subject, Header: h, Data: m.Data})
	if err != nil {
		t.Fatal(err)
	}
	checkCloudEvent(t, m.Subject, h, m.Data, e)
	if want := time.Date(2026, 11, 30, 5, 10, 21, 663638887, time.UTC); !e.Time.Equal(want) {
		t.Errorf("time: got %v, want %v", e.Time, want)
	}
}

func TestCloudEventsSDKReadsUnusualNames(t *testing.T) {
	for _, name := range unusualNames {
		m := roleBindingMeta("prod", name)
		m.Time = time.Date(2026, 11, 30, 5, 10, 21, 0, time.UTC)
		msg := &nats.Msg{Subject: m.Subject("kube").String(), Header: m.Header(), Data: nameBody(t, "ns", name)}
		e, err := consumer.DecodeMsg(msg)
		if err != nil {
			t.Fatalf("%.40q: %v", name, err)
		}
		if len(event.EncodeHeaderValue("ns/"+name)) > event.MaxHeaderValueLen {
			// ce-subject in the hashed form: a CloudEvents reader sees its start, "~~" and
			// the digest of the attribute.
			ce, err := binding.ToEvent(context.Background(), natsBinaryMessage{header: msg.Header, data: msg.Data})
			if err != nil || !strings.HasSuffix(ce.Subject(), "~~"+event.Digest("ns/"+name)) || !strings.HasPrefix("ns/"+name, strings.TrimSuffix(ce.Subject(), "~~"+event.Digest("ns/"+name))) {
				t.Errorf("%.40q: CloudEvents subject %.60q, %v: want the attribute's start and digest", name, ce.Subject(), err)
			}
			continue
		}
		checkCloudEvent(t, msg.Subject, msg.Header, msg.Data, e)
	}
}

func TestCloudEventsSDKReadsDataSchema(t *testing.T) {
	// A "%" belongs to the URI: the relay sends it as is, and both readers take it so.
	const schema = "https://k/mirror%20one/openapi/v3/api/v1#/components/schemas/io.k8s.api.core.v1.ConfigMap"
	m := relayMsg("kube", configMapMeta, configMapBody)
	m.Header.Set(event.HeaderCEDataSchema, schema)
	e, err := consumer.DecodeMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	if e.DataSchema != schema {
		t.Errorf("DataSchema: got %q, want %q", e.DataSchema, schema)
	}
	checkCloudEvent(t, m.Subject, m.Header, m.Data, e)
}

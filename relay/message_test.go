package relay

import (
	"errors"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// scriptedFailingBodyRules encode no body: Body fails with err.
type scriptedFailingBodyRules struct {
	defaultRules
	err error
}

func (r scriptedFailingBodyRules) Body(map[string]any, map[string]any) ([]byte, event.Payload, error) {
	return nil, event.PayloadObject, r.err
}

func TestMessageHeadersOfEveryKindArePercentEncoded(t *testing.T) {
	// Every k8s- value is written with event.EncodeHeaderValue (docs/events.md): the values
	// the relay adds beside the event's identity too, whatever text they carry.
	tests := []struct {
		name     string
		redacted string
		bodyErr  error
		header   string
		want     string
	}{
		{name: "a body that did not encode", bodyErr: errors.New("json: bad value \"x\"\n100%"),
			header: event.HeaderBodyOmitted, want: "encode: json: bad value \"x\"\n100%"},
		{name: "redacted paths", redacted: "data,metadata.annotations.secret note",
			header: event.HeaderRedacted, want: "data,metadata.annotations.secret note"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := benchSource()
			s.cfg.Redacted = tt.redacted
			if tt.bodyErr != nil {
				s.rules = scriptedFailingBodyRules{err: tt.bodyErr}
			}
			obj := scriptedConfigMap("ns", "a", "uid-a", "5", "x")
			meta := s.meta(obj, event.Modified, event.Live)
			msg, _, _ := s.message(meta, obj.Object, nil, nil, eventMarks{})
			got := msg.Header.Get(tt.header)
			if want := event.EncodeHeaderValue(tt.want); got != want {
				t.Fatalf("%s: got %q, want %q", tt.header, got, want)
			}
			if dec, err := event.DecodeHeaderValue(got); err != nil || dec != tt.want {
				t.Errorf("%s decoded: got %q, %v, want %q", tt.header, dec, err, tt.want)
			}
		})
	}
}

// scriptedWrappedRules wrap the object with its old state, as payload objectAndOld does.
type scriptedWrappedRules struct{ defaultRules }

func (scriptedWrappedRules) Body(obj, _ map[string]any) ([]byte, event.Payload, error) {
	return []byte(`{"object":{},"oldObject":null}`), event.PayloadObjectAndOld, nil
}

func TestMessageNamesTheDataSchemaOnlyOfABodyThatIsTheObject(t *testing.T) {
	// Sent as is: a "%" of the URI is not escaped again.
	const uri = "https://k/mirror%20one/openapi/v3/api/v1#/components/schemas/io.k8s.api.core.v1.ConfigMap"
	tests := []struct {
		name       string
		schema     string
		rules      Rules
		maxPayload int
		want       string
	}{
		{name: "the object", schema: uri, rules: defaultRules{}, want: uri},
		{name: "not configured", rules: defaultRules{}, want: ""},
		{name: "wrapped with its old state", schema: uri, rules: scriptedWrappedRules{}, want: ""},
		{name: "body left out", schema: uri, rules: defaultRules{}, maxPayload: 200, want: ""},
		{name: "body that did not encode", schema: uri, rules: scriptedFailingBodyRules{err: errors.New("x")}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := benchSource()
			s.cfg.DataSchema, s.cfg.MaxPayload, s.rules = tt.schema, tt.maxPayload, tt.rules
			obj := scriptedConfigMap("ns", "a", "uid-a", "5", "x")
			msg, _, _ := s.message(s.meta(obj, event.Modified, event.Live), obj.Object, nil, nil, eventMarks{})
			if got := msg.Header.Get(event.HeaderCEDataSchema); got != tt.want {
				t.Errorf("ce-dataschema: got %q, want %q", got, tt.want)
			}
			if tt.maxPayload > 0 && msg.Header.Get(event.HeaderBodyOmitted) == "" {
				t.Errorf("got a body within max_payload %d, want it left out", tt.maxPayload)
			}
		})
	}
	// The stream refusing the body: the reference sent instead names no schema either.
	s := benchSource()
	s.cfg.DataSchema = uri
	obj := scriptedConfigMap("ns", "a", "uid-a", "5", "x")
	msg, _, _ := s.message(s.meta(obj, event.Modified, event.Live), obj.Object, nil, nil, eventMarks{})
	omitBody(msg, event.BodyOmittedStreamLimit)
	if got := msg.Header.Get(event.HeaderCEDataSchema); got != "" {
		t.Errorf("ce-dataschema after omitBody: got %q, want none", got)
	}
}

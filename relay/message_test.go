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

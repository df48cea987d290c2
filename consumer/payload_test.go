package consumer_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestDecodePayloadModes(t *testing.T) {
	const old = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt"},"data":{"ca.crt":"w"}}`
	const patch = `{"data":{"ca.crt":"x"}}`
	tests := []struct {
		name, payload, body   string
		object, oldObj, patch string
	}{
		{name: "bare object", body: configMapBody, object: configMapBody},
		{
			name: "object and old", payload: string(event.PayloadObjectAndOld),
			body:   `{"object":` + configMapBody + `,"oldObject":` + old + `}`,
			object: configMapBody, oldObj: old,
		},
		{
			name: "object and unknown old", payload: string(event.PayloadObjectAndOld),
			body:   `{"object":` + configMapBody + `,"oldObject":null}`,
			object: configMapBody,
		},
		{
			name: "object and patch", payload: string(event.PayloadObjectAndPatch),
			body:   `{"object":` + configMapBody + `,"patch":` + patch + `}`,
			object: configMapBody, patch: patch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := relayMsg("kube", configMapMeta, tt.body)
			if tt.payload != "" {
				msg.Header.Set(event.HeaderPayload, tt.payload)
			}
			msg.Header.Set(event.HeaderRedacted, "data,spec.token")
			e, err := consumer.DecodeMsg(msg)
			if err != nil {
				t.Fatalf("DecodeMsg: %v", err)
			}
			if string(e.Object) != tt.object || string(e.OldObject) != tt.oldObj || string(e.Patch) != tt.patch {
				t.Errorf("got object %s old %s patch %s, want %s, %s, %s", e.Object, e.OldObject, e.Patch, tt.object, tt.oldObj, tt.patch)
			}
			if want := []string{"data", "spec.token"}; !slices.Equal(e.Redacted, want) {
				t.Errorf("got Redacted %q, want %q", e.Redacted, want)
			}
		})
	}
	for _, tt := range []struct{ name, payload, body string }{
		{"unknown payload", "object+diff", configMapBody},
		{"wrapper that is not JSON", string(event.PayloadObjectAndOld), "{"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := relayMsg("kube", configMapMeta, tt.body)
			msg.Header.Set(event.HeaderPayload, tt.payload)
			if _, err := consumer.DecodeMsg(msg); !errors.Is(err, consumer.ErrInvalidEvent) {
				t.Fatalf("DecodeMsg: got error %v, want ErrInvalidEvent", err)
			}
		})
	}
}

func TestDecodeReadsTheExtraHeadersPercentDecoded(t *testing.T) {
	tests := []struct {
		name     string
		omitted  string // k8s-body-omitted as sent
		redacted string // k8s-redacted as sent
		wantOmit string
		wantRed  []string
	}{
		{name: "as the relay writes them", omitted: event.EncodeHeaderValue("encode: bad\n100%"),
			redacted: event.EncodeHeaderValue("data,metadata.annotations.secret note"),
			wantOmit: "encode: bad\n100%", wantRed: []string{"data", "metadata.annotations.secret note"}},
		{name: "written unencoded by an older relay", omitted: "encode: 100% bad", redacted: "data",
			wantOmit: "encode: 100% bad", wantRed: []string{"data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := relayMsg("kube", configMapMeta, "")
			msg.Header.Set(event.HeaderBodyOmitted, tt.omitted)
			msg.Header.Set(event.HeaderRedacted, tt.redacted)
			e, err := consumer.DecodeMsg(msg)
			if err != nil {
				t.Fatalf("DecodeMsg: %v", err)
			}
			if e.BodyOmitted != tt.wantOmit || !slices.Equal(e.Redacted, tt.wantRed) {
				t.Errorf("got BodyOmitted %q, Redacted %q, want %q, %q", e.BodyOmitted, e.Redacted, tt.wantOmit, tt.wantRed)
			}
		})
	}
}

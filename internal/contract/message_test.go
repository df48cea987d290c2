package contract

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestDecodeRefusesWhatIsNotAnEvent(t *testing.T) {
	meta := event.Meta{Cluster: "c", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns",
		Name: "a", UID: "u1", ResourceVersion: "10", Type: event.Added, Origin: event.Live}
	tests := []struct {
		name    string
		header  nats.Header
		data    string
		wantErr bool
	}{
		{name: "an event with its body decodes", header: meta.Header(), data: `{"metadata":{"name":"a"}}`},
		{name: "an event without a body decodes", header: meta.Header()},
		{name: "headers that are no event are refused", header: nats.Header{"Nats-Msg-Id": {"x"}}, data: `{}`, wantErr: true},
		{name: "a body that is not JSON is refused", header: meta.Header(), data: `{"metadata"`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(7, meta.Subject("kube").String(), tt.header, []byte(tt.data))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if m.Seq != 7 || m.Meta != meta || m.Key() != "ns/a" || (m.Body != nil) != (tt.data != "") {
				t.Errorf("got %s with body %v, want seq 7: %s ns/a and a body exactly when there is data", m, m.Body, meta.Type)
			}
		})
	}
}

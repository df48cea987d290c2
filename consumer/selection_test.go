package consumer_test

import (
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestDecodeTellsLeavingTheSelectionFromDeletion(t *testing.T) {
	deleted := configMapMeta
	deleted.Type = event.Deleted
	tests := []struct {
		name   string
		header string // value of k8s-left-selection; "" leaves it out
		want   bool
	}{
		{name: "a deletion has no mark", want: false},
		{name: "an object that left the selection is marked", header: "true", want: true},
		{name: "only the value true marks it", header: "yes", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := relayMsg("kube", deleted, configMapBody)
			if tt.header != "" {
				msg.Header.Set(event.HeaderLeftSelection, tt.header)
			}
			e, err := consumer.DecodeMsg(msg)
			if err != nil {
				t.Fatalf("DecodeMsg: got error %v, want nil", err)
			}
			if e.LeftSelection != tt.want {
				t.Errorf("LeftSelection: got %v, want %v", e.LeftSelection, tt.want)
			}
			if e.Type != event.Deleted {
				t.Errorf("Type: got %s, want %s", e.Type, event.Deleted)
			}
		})
	}
}

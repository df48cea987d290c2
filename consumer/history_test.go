package consumer_test

import (
	"errors"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestDecodeReadsTheHistoryEpoch(t *testing.T) {
	restored := configMapMeta
	restored.History = 1
	tests := []struct {
		name string
		meta event.Meta
	}{
		{"epoch 0: no k8s-history, the id of before", configMapMeta},
		{"epoch 1: k8s-history and its id", restored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := relayMsg("kube", tt.meta, configMapBody)
			e, err := consumer.DecodeMsg(msg)
			if err != nil {
				t.Fatalf("DecodeMsg: got error %v, want nil", err)
			}
			if e.History != tt.meta.History {
				t.Errorf("History: got %d, want %d", e.History, tt.meta.History)
			}
			if e.ID() != msg.Header.Get(event.HeaderCEID) {
				t.Errorf("ID: got %s, want ce-id %s", e.ID(), msg.Header.Get(event.HeaderCEID))
			}
		})
	}
	if configMapMeta.ID() == restored.ID() {
		t.Errorf("ids of epochs 0 and 1: got both %s, want distinct", restored.ID())
	}
	// A k8s-history that does not match the id is not a relay event.
	msg := relayMsg("kube", restored, configMapBody)
	msg.Header.Del(event.HeaderHistory)
	if _, err := consumer.DecodeMsg(msg); !errors.Is(err, consumer.ErrInvalidEvent) {
		t.Errorf("DecodeMsg without k8s-history: got %v, want ErrInvalidEvent", err)
	}
}

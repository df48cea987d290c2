package consumer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestDecodeErrorsAreOneShortLine(t *testing.T) {
	foreign := nats.Header{}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "o-1", "ce-type": "com.example.order.created", "ce-source": "/shop"} {
		foreign.Set(k, v)
	}
	broken := relayMsg("kube", configMapMeta, configMapBody)
	broken.Header.Del(event.HeaderUID)
	broken.Header.Del(event.HeaderName)
	tests := []struct {
		name     string
		msg      *nats.Msg
		contains []string
	}{
		{
			name:     "no headers",
			msg:      &nats.Msg{Subject: "orders.new", Data: []byte(`{"id":1}`)},
			contains: []string{`"orders.new"`, "not a relay event"},
		},
		{
			name:     "a CloudEvent of another producer",
			msg:      &nats.Msg{Subject: "orders.new", Header: foreign, Data: []byte(`{"id":1}`)},
			contains: []string{`"orders.new"`, "not a relay event"},
		},
		{
			name:     "a relay event missing two headers",
			msg:      broken,
			contains: []string{event.HeaderName, "missing", "(and 1 more)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := consumer.DecodeMsg(tt.msg)
			if !errors.Is(err, consumer.ErrInvalidEvent) || !errors.Is(err, event.ErrInvalidHeader) {
				t.Fatalf("DecodeMsg: got error %v, want one wrapping ErrInvalidEvent and event.ErrInvalidHeader", err)
			}
			const maxLen = 120 // besides the subject: one line a log shows whole
			if msg := err.Error(); strings.Contains(msg, "\n") || len(msg)-len(tt.msg.Subject) > maxLen {
				t.Errorf("DecodeMsg: got error of %d bytes over %d lines, want one line of at most %d besides the subject: %q", len(msg), strings.Count(msg, "\n")+1, maxLen, msg)
			}
			for _, c := range tt.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("DecodeMsg: got error %q, want it to mention %q", err, c)
				}
			}
		})
	}
}

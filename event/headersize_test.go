package event

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestHeaderSizeIsWhatTheClientWrites checks HeaderSize against nats.go's own count of the
// header block it sends, so the relay's size limits measure what the server measures.
func TestHeaderSizeIsWhatTheClientWrites(t *testing.T) {
	meta := Meta{Cluster: "prod", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns",
		Name: strings.Repeat("n", 300), UID: "u", ResourceVersion: "7", Type: Modified, Origin: Live}
	tests := []struct {
		name   string
		header nats.Header
	}{
		{"none", nil},
		{"one", nats.Header{"a": {"b"}}},
		{"repeated key", nats.Header{"a": {"b", "cc"}}},
		{"an event's", meta.Header()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &nats.Msg{Subject: "s", Header: tt.header, Data: []byte("body")}
			want := m.Size() - len(m.Subject) - len(m.Data)
			if got := HeaderSize(tt.header); got != want {
				t.Errorf("got %d, want %d (nats.go's count)", got, want)
			}
		})
	}
}

package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestRelayCreatesItsStreamWithTheConfiguredLimitsAndWarnsWithoutAny(t *testing.T) {
	js := jsClient(t)
	tests := []struct {
		name        string
		set         map[string]string
		maxBytes    int64
		compression jetstream.StoreCompression
		warns       bool
	}{
		{"max bytes and s2", map[string]string{"RELAY_MAX_BYTES": "64Mi", "RELAY_STREAM_COMPRESSION": "s2"}, 64 << 20, jetstream.S2Compression, false},
		{"no limits", nil, -1, jetstream.NoCompression, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, _ := testConfigMaps(t)
			vars := relayVars(name)
			vars["RELAY_RESOURCES"] = "configmaps"
			vars["RELAY_NAMESPACES"] = name
			for k, v := range tt.set {
				vars[k] = v
			}
			r := startRelay(t, vars)
			r.WaitWatching(t, js, vars["RELAY_CHECKPOINT_BUCKET"], 1)
			r.stop(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := js.Stream(ctx, vars["RELAY_STREAM"])
			if err != nil {
				t.Fatal(err)
			}
			if cfg := s.CachedInfo().Config; cfg.MaxBytes != tt.maxBytes || cfg.Compression != tt.compression {
				t.Errorf("stream: max bytes %d, compression %s; want %d, %s", cfg.MaxBytes, cfg.Compression, tt.maxBytes, tt.compression)
			}
			if got := r.Saw("stream created without limits"); got != tt.warns {
				t.Errorf("warned of a stream without limits: got %t, want %t\n%s", got, tt.warns, r.Output())
			}
		})
	}
}

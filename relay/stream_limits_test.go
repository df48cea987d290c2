package relay

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
)

// streamTestJS returns a JetStream context on an in-process nats-server of the test's own.
func streamTestJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc := natstest.Connect(t, natstest.Start(t, nil))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// ensureLogged runs EnsureStream with cfg and returns the stream's configuration afterwards
// and what it logged.
func ensureLogged(t *testing.T, js jetstream.JetStream, cfg StreamConfig) (jetstream.StreamConfig, string) {
	t.Helper()
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(zerolog.New(&logs).WithContext(context.Background()), 30*time.Second)
	defer cancel()
	if _, err := EnsureStream(ctx, js, cfg); err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	s, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config, logs.String()
}

// unlimitedWarning is the start of the warning about a stream created without limits.
const unlimitedWarning = "stream created without limits"

func TestEnsureStreamCreatesTheStreamWithItsLimitsAndWarnsWhenThereAreNone(t *testing.T) {
	js := streamTestJS(t)
	tests := []struct {
		name        string
		maxAge      time.Duration
		maxBytes    int64
		compression jetstream.StoreCompression
		warns       bool
	}{
		{"max bytes and s2 compression are set", 0, 64 << 20, jetstream.S2Compression, false},
		{"max age alone is a limit", time.Hour, 0, jetstream.NoCompression, false},
		{"neither max age nor max bytes warns", 0, 0, jetstream.NoCompression, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := "c" + string(rune('a'+i))
			cfg := StreamConfig{Name: "S" + cluster, Prefix: "kube", Cluster: cluster, Replicas: 1, Duplicates: time.Minute,
				MaxAge: tt.maxAge, MaxBytes: tt.maxBytes, Compression: tt.compression}
			got, logs := ensureLogged(t, js, cfg)
			wantBytes := tt.maxBytes
			if wantBytes == 0 {
				wantBytes = -1 // nats-server's unlimited
			}
			if got.MaxBytes != wantBytes || got.MaxAge != tt.maxAge || got.Compression != tt.compression {
				t.Errorf("created stream: max bytes %d, max age %s, compression %s; want %d, %s, %s",
					got.MaxBytes, got.MaxAge, got.Compression, wantBytes, tt.maxAge, tt.compression)
			}
			warned := strings.Contains(logs, unlimitedWarning)
			if warned != tt.warns {
				t.Errorf("warned about a stream without limits: got %t, want %t; logs:\n%s", warned, tt.warns, logs)
			}
			if warned && !(strings.Contains(logs, `"level":"warn"`) && strings.Contains(logs, "RELAY_MAX_AGE") && strings.Contains(logs, "RELAY_MAX_BYTES")) {
				t.Errorf("warning: got %s, want level warn naming RELAY_MAX_AGE and RELAY_MAX_BYTES", logs)
			}
		})
	}
}

func TestEnsureStreamLeavesAnExistingStreamsLimitsAndWarnsOfEachDifference(t *testing.T) {
	js := streamTestJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name     string
		existing jetstream.StreamConfig
		cfg      StreamConfig
		want     []string // warnings
		notWant  []string
	}{
		{"other max bytes and compression are warned",
			jetstream.StreamConfig{MaxBytes: 1 << 30, MaxAge: time.Hour},
			StreamConfig{MaxBytes: 64 << 20, MaxAge: time.Hour, Compression: jetstream.S2Compression},
			[]string{"existing stream has another max bytes, left as is", "existing stream has another compression, left as is"}, nil},
		{"an unlimited stream matches max bytes 0",
			jetstream.StreamConfig{Compression: jetstream.S2Compression},
			StreamConfig{Compression: jetstream.S2Compression},
			nil, []string{"another max bytes", "another compression", unlimitedWarning}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := "e" + string(rune('a'+i))
			tt.existing.Name, tt.existing.Subjects = "E"+cluster, []string{"kube." + cluster + ".>"}
			tt.existing.Duplicates = time.Minute
			if _, err := js.CreateStream(ctx, tt.existing); err != nil {
				t.Fatal(err)
			}
			tt.cfg.Name, tt.cfg.Prefix, tt.cfg.Cluster, tt.cfg.Replicas, tt.cfg.Duplicates = tt.existing.Name, "kube", cluster, 1, time.Minute
			got, logs := ensureLogged(t, js, tt.cfg)
			wantBytes := tt.existing.MaxBytes
			if wantBytes == 0 {
				wantBytes = -1 // nats-server's unlimited
			}
			if got.MaxBytes != wantBytes || got.Compression != tt.existing.Compression {
				t.Errorf("existing stream changed: max bytes %d, compression %s; want %d, %s", got.MaxBytes, got.Compression, wantBytes, tt.existing.Compression)
			}
			for _, w := range tt.want {
				if !strings.Contains(logs, w) {
					t.Errorf("logs lack %q:\n%s", w, logs)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(logs, w) {
					t.Errorf("logs have %q:\n%s", w, logs)
				}
			}
		})
	}
}

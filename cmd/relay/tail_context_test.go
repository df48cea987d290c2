package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestTailReachesTheServerOfANATSContext runs relay tail against a nats-server that requires a
// password, with nothing but a nats CLI context saying where it is and how to log in: named by
// $NATS_CONTEXT, by --context, and selected with the nats CLI (context.txt). The tail follows
// the cluster's default stream, which only an authenticated client can look up, or the legacy
// KUBE when the cluster has none.
func TestTailReachesTheServerOfANATSContext(t *testing.T) {
	name := testName(t)
	auth := testenv.UserPasswordAuth("ctx-"+name, "pw-"+rand.Text())
	srv := startAuthNATS(t, auth)
	js := authJSClient(t, srv.URL(), auth)
	stream := event.DefaultStream(name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"kube." + name + ".>"}}); err != nil {
		t.Fatal(err)
	}
	// The stream of relays from before names held the cluster, of a cluster "legacy".
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: event.LegacyStream, Subjects: []string{"kube.legacy.>"}}); err != nil {
		t.Fatal(err)
	}

	configDir := t.TempDir()
	body, err := json.Marshal(map[string]string{"description": "relay tail test", "url": srv.URL(), "user": auth.User, "password": auth.Password})
	if err != nil {
		t.Fatal(err)
	}
	contexts := filepath.Join(configDir, "nats", "context")
	if err := os.MkdirAll(contexts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(contexts, name+".json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	selected := t.TempDir()
	if err := os.MkdirAll(filepath.Join(selected, "nats", "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(selected, "nats", "context", name+".json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(selected, "nats", "context.txt"), []byte(name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		vars map[string]string
		args []string
		// stream is the stream followed; empty: the cluster's default.
		stream string
	}{
		{name: "NATS_CONTEXT names it", vars: map[string]string{"XDG_CONFIG_HOME": configDir, "NATS_CONTEXT": name},
			args: []string{"--cluster", name}},
		{name: "--context names it", vars: map[string]string{"XDG_CONFIG_HOME": configDir}, args: []string{"--context", name, "--cluster", name}},
		{name: "the nats CLI selected it; the cluster comes from RELAY_CLUSTER",
			vars: map[string]string{"XDG_CONFIG_HOME": selected, "RELAY_CLUSTER": name}},
		{name: "a cluster without its default stream follows the legacy KUBE", vars: map[string]string{"XDG_CONFIG_HOME": configDir},
			args: []string{"--context", name, "--cluster", "legacy"}, stream: event.LegacyStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startTail(t, tt.vars, tt.args...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			followed := stream
			if tt.stream != "" {
				followed = tt.stream
			}
			want := "relay tail: following stream " + followed + " on " + srv.URL()
			if err := p.WaitLine(ctx, want); err != nil {
				t.Fatalf("relay tail: want %q: %v\n%s", want, err, p.Output())
			}
			p.interrupt(t)
		})
	}
}

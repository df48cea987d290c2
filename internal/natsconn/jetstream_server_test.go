package natsconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
)

// jsTestTimeout bounds each JetStream round of these tests; on a working setup they take
// milliseconds.
const jsTestTimeout = 30 * time.Second

// useJetStream creates a stream and a key-value bucket through js and publishes to both,
// the writes the relay makes: stream and bucket creation (API requests), an event with its
// PubAck, and a bucket entry written and read back.
func useJetStream(ctx context.Context, js jetstream.JetStream, name string) error {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KUBE_" + name, Subjects: []string{"kube." + name + ".>"}}); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	ack, err := js.PublishAsync("kube."+name+".core.v1.pods.default.web.added", []byte("{}"))
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	select {
	case <-ack.Ok():
	case err := <-ack.Err():
		return fmt.Errorf("publish ack: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("publish ack: %w", ctx.Err())
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "checkpoints-" + name})
	if err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	if _, err := kv.Put(ctx, "pods", []byte("42")); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if e, err := kv.Get(ctx, "pods"); err != nil || string(e.Value()) != "42" {
		return fmt.Errorf("get: got %v, want 42", err)
	}
	return nil
}

func TestInboxPrefixCarriesEveryJetStreamReply(t *testing.T) {
	// The relay's user may receive replies on its own inboxes only, not on _INBOX.>.
	s := natstest.Start(t, natstest.ParseConfig(t, `authorization { users = [ { user: relay, password: pw, permissions: {
		publish: { allow: ["$JS.API.>", "$KV.>", "kube.>"] },
		subscribe: { allow: ["_INBOX_relay.>"] } } } ] }`))
	cfg := Config{URL: s.ClientURL(), User: "relay", Password: "pw", InboxPrefix: "_INBOX_relay"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := zerolog.Nop().WithContext(context.Background())

	t.Run("the relay's connection", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, jsTestTimeout)
		defer cancel()
		conn, err := Connect(ctx, cfg, func(error) {})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		js, err := cfg.JetStream(conn.NATS())
		if err != nil {
			t.Fatal(err)
		}
		if err := useJetStream(ctx, js, "connect"); err != nil {
			t.Error(err)
		}
	})
	t.Run("relay tail's connection", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, jsTestTimeout)
		defer cancel()
		nc, err := Dial(cfg, "natsconn-test", dialTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := cfg.JetStream(nc)
		if err != nil {
			t.Fatal(err)
		}
		if err := useJetStream(ctx, js, "dial"); err != nil {
			t.Error(err)
		}
	})
	t.Run("without the prefix the permissions refuse the replies", func(t *testing.T) {
		// The answer never arrives: a short wait is the refusal (the test above passing
		// shows the server answers at once).
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		plain := cfg
		plain.InboxPrefix = ""
		nc, err := Dial(plain, "natsconn-test", dialTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := plain.JetStream(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.AccountInfo(ctx); err == nil {
			t.Error("account info on _INBOX: got an answer, want the permissions to refuse it")
		}
	})
}

func TestJetStreamDomainPutsStreamAndBucketsOnTheLeaf(t *testing.T) {
	hub, leaves := natstest.HubAndLeaves(t, "leaf")
	leaf := leaves["leaf"]

	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "RELAY_JS_DOMAIN", cfg: Config{URL: hub.ClientURL(), JSDomain: "leaf"}},
		{name: "RELAY_JS_API_PREFIX", cfg: Config{URL: hub.ClientURL(), JSAPIPrefix: "$JS.leaf.API"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(zerolog.Nop().WithContext(context.Background()), jsTestTimeout)
			defer cancel()
			if err := tt.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			// Connected to the hub, writing to the leaf's JetStream.
			conn, err := Connect(ctx, tt.cfg, func(error) {})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			js, err := tt.cfg.JetStream(conn.NATS())
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("c%d", i)
			if err := useJetStream(ctx, js, name); err != nil {
				t.Fatal(err)
			}
			for _, where := range []struct {
				s    *server.Server
				want bool
			}{{leaf, true}, {hub, false}} {
				nc, err := nats.Connect(where.s.ClientURL())
				if err != nil {
					t.Fatal(err)
				}
				local, err := jetstream.New(nc)
				if err != nil {
					t.Fatal(err)
				}
				for _, stream := range []string{"KUBE_" + name, "KV_checkpoints-" + name} {
					info, err := local.Stream(ctx, stream)
					switch {
					case where.want && err != nil:
						t.Errorf("stream %s on %s: %v, want it there", stream, where.s.Name(), err)
					case where.want && info.CachedInfo().State.Msgs != 1:
						t.Errorf("stream %s on %s: got %d messages, want 1", stream, where.s.Name(), info.CachedInfo().State.Msgs)
					case !where.want && !errors.Is(err, jetstream.ErrStreamNotFound):
						t.Errorf("stream %s on %s: got %v, want %v", stream, where.s.Name(), err, jetstream.ErrStreamNotFound)
					}
				}
				nc.Close()
			}
		})
	}
}

func TestConnectLogsWhereEachSettingCameFromWithoutValues(t *testing.T) {
	s := natstest.Start(t, natstest.ParseConfig(t, `authorization { user: relay, password: "pw-secret" }`))
	home := t.TempDir()
	writeContext(t, home, "dev", `{"url": "`+s.ClientURL()+`", "password": "pw-secret"}`)
	cfg := Config{CLI: CLIVars{User: "relay"}, InboxPrefix: "_INBOX_relay", Context: "dev", ConfigDir: home}
	var logs strings.Builder
	ctx, cancel := context.WithTimeout(zerolog.New(&logs).WithContext(context.Background()), jsTestTimeout)
	defer cancel()
	conn, err := Connect(ctx, cfg, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, `"message":"nats settings"`) {
			if line != "" {
				t.Errorf("nats settings logged twice:\n%s", logs.String())
			}
			line = l
		}
	}
	want := `"from":{` // then each setting, in any order
	for _, part := range []string{want, `"url":"context dev url"`, `"user":"NATS_USER"`, `"password":"context dev password"`, `"inbox_prefix":"RELAY_NATS_INBOX_PREFIX"`} {
		if !strings.Contains(line, part) {
			t.Errorf("nats settings line %q lacks %s", line, part)
		}
	}
	if strings.Contains(logs.String(), "pw-secret") {
		t.Errorf("the log holds the password:\n%s", logs.String())
	}
}

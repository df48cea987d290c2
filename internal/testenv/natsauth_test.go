package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsConnectTimeout bounds one connection attempt, TLS handshake included, on a busy machine.
const natsConnectTimeout = 10 * time.Second

func TestNATSAuthServerDemandsItsCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		// auth makes the server's demand and the client material it accepts; wrong makes
		// material it must refuse.
		auth, wrong func(dir string, right NATSAuth) (NATSAuth, error)
	}{
		{
			name:  "user and password",
			auth:  func(string, NATSAuth) (NATSAuth, error) { return UserPasswordAuth("relay", "s3cret"), nil },
			wrong: func(string, NATSAuth) (NATSAuth, error) { return UserPasswordAuth("relay", "wrong"), nil },
		},
		{
			name:  "token",
			auth:  func(string, NATSAuth) (NATSAuth, error) { return TokenAuth("t0ken"), nil },
			wrong: func(string, NATSAuth) (NATSAuth, error) { return TokenAuth("wrong"), nil },
		},
		{
			name:  "nkey",
			auth:  func(dir string, _ NATSAuth) (NATSAuth, error) { return NewNKeyAuth(dir) },
			wrong: func(dir string, _ NATSAuth) (NATSAuth, error) { return NewNKeyAuth(dir) },
		},
		{
			name:  "credentials of another operator",
			auth:  func(dir string, _ NATSAuth) (NATSAuth, error) { return NewCredsAuth(dir) },
			wrong: func(dir string, _ NATSAuth) (NATSAuth, error) { return NewCredsAuth(dir) },
		},
		{
			name: "client certificate of another authority",
			auth: func(dir string, _ NATSAuth) (NATSAuth, error) { return NewTLSAuth(dir) },
			wrong: func(dir string, right NATSAuth) (NATSAuth, error) {
				other, err := NewTLSAuth(dir)
				other.CAFile = right.CAFile // trust the server; only the client certificate is wrong
				return other, err
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 2*time.Minute)
			right, err := tc.auth(env.TempDir(t), NATSAuth{})
			if err != nil {
				t.Fatalf("make credentials: %v", err)
			}
			wrong, err := tc.wrong(env.TempDir(t), right)
			if err != nil {
				t.Fatalf("make wrong credentials: %v", err)
			}
			srv, err := StartNATS(ctx, env.TempDir(t), NATSOptions{Auth: right.ServerConfig})
			if err != nil {
				t.Fatalf("start nats: %v", err)
			}
			t.Cleanup(func() { _ = srv.Stop() })

			opts, err := right.ClientOptions()
			if err != nil {
				t.Fatalf("client options: %v", err)
			}
			nc, err := nats.Connect(srv.URL(), append(opts, nats.Timeout(natsConnectTimeout))...)
			if err != nil {
				t.Fatalf("connect with the right credentials: %v", err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			// JetStream must work for the authenticated user: the relay needs a stream and a bucket.
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUTH", Subjects: []string{"auth.>"}}); err != nil {
				t.Fatalf("create stream: %v", err)
			}
			if _, err := js.Publish(ctx, "auth.x", []byte("x")); err != nil {
				t.Fatalf("publish: %v", err)
			}

			// Anonymous still trusts the server when there is a CA, so that only the missing
			// client credentials can be the reason for a refusal.
			var anonymous []nats.Option
			if right.CAFile != "" {
				anonymous = append(anonymous, nats.RootCAs(right.CAFile))
			}
			wrongOpts, err := wrong.ClientOptions()
			if err != nil {
				t.Fatalf("wrong client options: %v", err)
			}
			for name, opts := range map[string][]nats.Option{"anonymous": anonymous, "wrong": wrongOpts} {
				nc, err := nats.Connect(srv.URL(), append(opts, nats.Timeout(natsConnectTimeout))...)
				if err == nil {
					nc.Close()
					t.Errorf("connect %s: got a connection, want a refusal", name)
					continue
				}
				t.Logf("connect %s: %v", name, err)
			}
		})
	}
}

func TestNATSAuthEmptyLeavesServerOpen(t *testing.T) {
	ctx := testContext(t, time.Minute)
	srv, err := StartNATS(ctx, env.TempDir(t), NATSOptions{})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	nc, err := nats.Connect(srv.URL(), nats.Timeout(natsConnectTimeout))
	if err != nil {
		t.Fatalf("anonymous connect to a server without Auth: %v", err)
	}
	nc.Close()
}

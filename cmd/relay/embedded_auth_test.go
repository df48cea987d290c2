package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestEmbeddedServerListensBeyondLoopbackOnlyWithCredentials checks that the environment
// reaches natsconn's rules for the embedded server (natsconn's own tests cover each rule):
// every credential variable lifts the loopback rule, and the client-only files are refused
// in embedded mode but not with NATS_URL.
func TestEmbeddedServerListensBeyondLoopbackOnlyWithCredentials(t *testing.T) {
	dir := t.TempDir()
	seed := writeNKeySeed(t, dir)
	creds := writeFile(t, dir, "relay.creds")
	tests := []struct {
		name string
		env  map[string]string
		// want lists the problems as VAR=value; empty: accepted.
		want []string
	}{
		{name: "loopback without credentials", env: map[string]string{"RELAY_NATS_LISTEN": "127.0.0.1:4222"}},
		{name: "all interfaces without credentials", env: map[string]string{"RELAY_NATS_LISTEN": "0.0.0.0:4222"},
			want: []string{"RELAY_NATS_LISTEN=0.0.0.0:4222"}},
		{name: "all interfaces with user and password",
			env: map[string]string{"RELAY_NATS_LISTEN": "0.0.0.0:4222", "RELAY_NATS_USER": "relay", "RELAY_NATS_PASSWORD": "pw"}},
		{name: "all interfaces with a token", env: map[string]string{"RELAY_NATS_LISTEN": "0.0.0.0:4222", "RELAY_NATS_TOKEN": "tok"}},
		{name: "all interfaces with an nkey", env: map[string]string{"RELAY_NATS_LISTEN": "0.0.0.0:4222", "RELAY_NATS_NKEY": seed}},
		{name: "a password without user is redacted", env: map[string]string{"RELAY_NATS_PASSWORD": "pw-secret"},
			want: []string{"RELAY_NATS_PASSWORD=<redacted>"}},
		{name: "client files in embedded mode", env: map[string]string{"RELAY_NATS_CREDS": creds,
			"RELAY_NATS_TLS_CA": creds, "RELAY_NATS_TLS_CERT": creds, "RELAY_NATS_TLS_KEY": creds},
			want: []string{"RELAY_NATS_CREDS=" + creds, "RELAY_NATS_TLS_CA=" + creds, "RELAY_NATS_TLS_CERT=" + creds, "RELAY_NATS_TLS_KEY=" + creds}},
		{name: "external NATS: credentials files and TLS are the client's",
			env: map[string]string{"NATS_URL": "nats://a:4222", "RELAY_NATS_LISTEN": "0.0.0.0:4222", "RELAY_NATS_CREDS": creds,
				"RELAY_NATS_TLS_CA": creds, "RELAY_NATS_TLS_CERT": creds, "RELAY_NATS_TLS_KEY": creds}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"RELAY_RESOURCES": "pods"}
			for k, v := range tt.env {
				env[k] = v
			}
			setConfigEnv(t, env)
			_, err := loadConfig()
			var got []string
			if err != nil {
				for _, p := range configErrorProblems(t, err) {
					got = append(got, p.Var+"="+p.Value)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems: got %q, want %q (%v)", got, tt.want, err)
			}
		})
	}
}

// writeNKeySeed writes a new user NKey seed file into dir and returns its path.
func writeNKeySeed(t *testing.T, dir string) string {
	t.Helper()
	auth, err := testenv.NewNKeyAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	return auth.NKeySeedFile
}

// configErrorProblems returns the problems of a *ConfigError, failing the test for any other
// error.
func configErrorProblems(t *testing.T, err error) []Problem {
	t.Helper()
	var cerr *ConfigError
	if !errors.As(err, &cerr) {
		t.Fatalf("got error %T %v, want a *ConfigError", err, err)
	}
	return cerr.Problems
}

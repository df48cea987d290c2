package main

import (
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
)

// TestTailReadsTheRelaysNATSSettings: relay tail connects with the NATS settings the relay
// reads (its own variables, the nats CLI's and the context's name), and the relay's other variables, even invalid ones, do not stop it.
func TestTailReadsTheRelaysNATSSettings(t *testing.T) {
	setConfigEnv(t, map[string]string{
		"NATS_URL":                "nats://a:4222, nats://b:4222",
		"RELAY_NATS_USER":         "relay",
		"RELAY_NATS_PASSWORD":     "pw",
		"RELAY_NATS_TOKEN":        "tok",
		"RELAY_NATS_CREDS":        "relay.creds",
		"RELAY_NATS_NKEY":         "relay.nk",
		"RELAY_NATS_TLS_CA":       "ca.pem",
		"RELAY_NATS_TLS_CERT":     "cert.pem",
		"RELAY_NATS_TLS_KEY":      "key.pem",
		"RELAY_JS_DOMAIN":         "leaf",
		"RELAY_NATS_INBOX_PREFIX": "_INBOX_tail",
		// The nats CLI's names, weaker than the relay's.
		"NATS_USER":       "cli-user",
		"NATS_PASSWORD":   "cli-pw",
		"NATS_TOKEN":      "cli-tok",
		"NATS_CREDS":      "cli.creds",
		"NATS_NKEY":       "cli.nk",
		"NATS_CA":         "cli-ca.pem",
		"NATS_CERT":       "cli-cert.pem",
		"NATS_KEY":        "cli-key.pem",
		"NATS_CONTEXT":    "prod",
		"XDG_CONFIG_HOME": "/config",
		// Not tail's: invalid, and ignored.
		"RELAY_KUBE_QPS":      "fast",
		"RELAY_LEADER_ELECT":  "maybe",
		"RELAY_MEMORY_BUDGET": "lots",
		"RELAY_BUFFER_SIZE":   "",
	})
	got, err := tailNATS()
	if err != nil {
		t.Fatalf("tailNATS: %v", err)
	}
	want := natsconn.Config{URL: "nats://a:4222, nats://b:4222", DataDir: "./relay-data", Listen: "127.0.0.1:4222",
		User: "relay", Password: "pw", Token: "tok", Creds: "relay.creds", NKey: "relay.nk",
		TLSCA: "ca.pem", TLSCert: "cert.pem", TLSKey: "key.pem", JSDomain: "leaf", InboxPrefix: "_INBOX_tail",
		CLI: natsconn.CLIVars{User: "cli-user", Password: "cli-pw", Token: "cli-tok", Creds: "cli.creds", NKey: "cli.nk",
			CA: "cli-ca.pem", Cert: "cli-cert.pem", Key: "cli-key.pem"},
		Context: "prod", ConfigDir: "/config"}
	if got != want {
		t.Errorf("tailNATS: got %#v, want %#v", got, want)
	}
}

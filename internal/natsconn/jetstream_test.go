package natsconn

import (
	"strings"
	"testing"
)

func TestValidateJetStreamTargetAndInboxPrefix(t *testing.T) {
	external := func(c Config) Config { c.URL = "nats://a:4222"; return c }
	tests := []struct {
		name string
		cfg  Config
		// want lists the problems as VAR=value: reason part.
		want []string
	}{
		{name: "a domain", cfg: external(Config{JSDomain: "leaf-1"})},
		{name: "an API prefix, with or without the trailing dot", cfg: external(Config{JSAPIPrefix: "$JS.hub.API."})},
		{name: "an inbox prefix", cfg: external(Config{InboxPrefix: "_INBOX_relay.prod"})},
		{name: "a domain on the embedded server", cfg: with(embedded, func(c *Config) { c.JSDomain = "dev" })},
		{name: "a domain of two tokens", cfg: external(Config{JSDomain: "a.b"}), want: []string{"RELAY_JS_DOMAIN=a.b: a JetStream domain is one subject token"}},
		{name: "a domain with a wildcard", cfg: external(Config{JSDomain: "leaf*"}), want: []string{"RELAY_JS_DOMAIN=leaf*: a JetStream domain is one subject token: wildcards"}},
		{name: "a domain with a blank", cfg: external(Config{JSDomain: "leaf 1"}), want: []string{"RELAY_JS_DOMAIN=leaf 1: a JetStream domain is one subject token: whitespace"}},
		{name: "an API prefix with a wildcard", cfg: external(Config{JSAPIPrefix: "$JS.*.API"}), want: []string{"RELAY_JS_API_PREFIX=$JS.*.API: a JetStream API prefix is a subject without wildcards"}},
		{name: "an API prefix with an empty token", cfg: external(Config{JSAPIPrefix: "$JS..API"}), want: []string{"RELAY_JS_API_PREFIX=$JS..API: a JetStream API prefix is a subject without wildcards: empty token"}},
		{name: "a domain and an API prefix", cfg: external(Config{JSDomain: "leaf", JSAPIPrefix: "$JS.hub.API"}),
			want: []string{`RELAY_JS_API_PREFIX=$JS.hub.API: conflicts with RELAY_JS_DOMAIN="leaf"`}},
		{name: "an API prefix on the embedded server", cfg: with(embedded, func(c *Config) { c.JSAPIPrefix = "$JS.hub.API" }),
			want: []string{"RELAY_JS_API_PREFIX=$JS.hub.API: the embedded nats-server"}},
		{name: "an inbox prefix ending in a dot", cfg: external(Config{InboxPrefix: "_INBOX_relay."}), want: []string{"RELAY_NATS_INBOX_PREFIX=_INBOX_relay.: an inbox prefix is a subject without wildcards: empty token"}},
		{name: "an inbox prefix with a wildcard", cfg: external(Config{InboxPrefix: "_INBOX.>"}), want: []string{"RELAY_NATS_INBOX_PREFIX=_INBOX.>: an inbox prefix is a subject without wildcards: wildcards"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var got []string
			if err != nil {
				for _, p := range configErrorProblems(t, err) {
					got = append(got, p.Var+"="+p.Value+": "+p.Reason)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems: got %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("problem %d: got %q, want it to start with %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

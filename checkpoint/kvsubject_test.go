package checkpoint

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestKVPutPrefixFollowsNatsGo(t *testing.T) {
	plain := jetstream.StreamConfig{Name: "KV_b"}
	local := jetstream.StreamConfig{Name: "KV_view", Mirror: &jetstream.StreamSource{Name: "KV_origin"}}
	external := jetstream.StreamConfig{Name: "KV_view", Mirror: &jetstream.StreamSource{Name: "KV_origin",
		External: &jetstream.ExternalStream{APIPrefix: "$JS.leaf.API"}}}
	tests := []struct {
		name string
		opts jetstream.JetStreamOptions
		cfg  jetstream.StreamConfig
		want string
	}{
		{"default prefix writes the bucket's own subjects", jetstream.JetStreamOptions{}, plain, "$KV.b."},
		{"the default prefix given explicitly adds nothing", jetstream.JetStreamOptions{APIPrefix: "$JS.API"}, plain, "$KV.b."},
		{"a domain prefixes its api", jetstream.JetStreamOptions{Domain: "leaf"}, plain, "$JS.leaf.API.$KV.b."},
		{"an api prefix without a dot gets one", jetstream.JetStreamOptions{APIPrefix: "acct.JS"}, plain, "acct.JS.$KV.b."},
		{"an api prefix with a dot keeps it", jetstream.JetStreamOptions{APIPrefix: "acct.JS."}, plain, "acct.JS.$KV.b."},
		{"a local mirror writes to its origin", jetstream.JetStreamOptions{}, local, "$KV.origin."},
		{"a local mirror through a domain writes to its origin there", jetstream.JetStreamOptions{Domain: "leaf"}, local, "$JS.leaf.API.$KV.origin."},
		{"an external mirror writes through its external prefix only", jetstream.JetStreamOptions{Domain: "hub"}, external, "$JS.leaf.API.$KV.origin."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kvPutPrefix(tt.opts, tt.cfg); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

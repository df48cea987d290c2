package checkpoint

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// KV subject names, as nats.go's jetstream package spells them (api.go, kv.go).
const (
	// kvStreamPrefix starts the name of a bucket's stream: "KV_<bucket>".
	kvStreamPrefix = "KV_"
	// jsDomainAPIPrefix is the API prefix of a JetStream context made with NewWithDomain.
	jsDomainAPIPrefix = "$JS.%s.API."
)

// kvPutPrefix returns the subject prefix under which a write of one of the bucket's keys
// is published, exactly as nats.go v1.55.0 derives it (jetstream/kv.go: mapStreamToKVS and
// KeyValue.Put), from the JetStream context's options and the bucket's stream configuration:
//
//   - "$KV.<bucket>." through a JetStream context with the default API prefix;
//   - "<api prefix>$KV.<bucket>." through one made with NewWithDomain ("$JS.<domain>.API.")
//     or NewWithAPIPrefix: the server of that domain maps "$JS.<domain>.API.$KV.>" to
//     "$KV.>" (nats-server's generateJSMappingTable), so that the write reaches the bucket
//     across leaf nodes instead of any bucket of that name the local server has;
//   - for a bucket that mirrors another, the origin's subjects: "<api prefix>$KV.<origin>."
//     (the prefix as above), or "<external API prefix>.$KV.<origin>." when the mirror sources
//     it from another domain or account (the context's prefix is then left out).
//
// Writing by hand "$KV.<bucket>." ignores all three, and the write lands in the wrong bucket
// or in none.
func kvPutPrefix(opts jetstream.JetStreamOptions, cfg jetstream.StreamConfig) string {
	api := apiPrefix(opts)
	useAPI := api != jetstream.DefaultAPIPrefix
	pre := "$KV." + strings.TrimPrefix(cfg.Name, kvStreamPrefix) + "."
	if m := cfg.Mirror; m != nil {
		origin := strings.TrimPrefix(m.Name, kvStreamPrefix)
		if m.External != nil && m.External.APIPrefix != "" {
			useAPI = false
			pre = m.External.APIPrefix + ".$KV." + origin + "."
		} else {
			pre = "$KV." + origin + "."
		}
	}
	if useAPI {
		return api + pre
	}
	return pre
}

// apiPrefix returns the API prefix a JetStream context sends its requests with, from the
// options it reports: NewWithDomain sets Domain, NewWithAPIPrefix sets APIPrefix (a dot
// is added when it lacks one), New neither.
func apiPrefix(opts jetstream.JetStreamOptions) string {
	switch {
	case opts.Domain != "":
		return fmt.Sprintf(jsDomainAPIPrefix, opts.Domain)
	case opts.APIPrefix == "":
		return jetstream.DefaultAPIPrefix
	case strings.HasSuffix(opts.APIPrefix, "."):
		return opts.APIPrefix
	default:
		return opts.APIPrefix + "."
	}
}

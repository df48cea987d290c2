package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// StreamConfig is the JetStream stream events are published to.
type StreamConfig struct {
	Name            string
	Prefix, Cluster string
	Replicas        int
	// Duplicates is the stream's duplicate window: a message id seen within it is dropped.
	Duplicates time.Duration
	// MaxAge is how long messages are kept; 0 keeps them until other limits apply.
	MaxAge time.Duration
	// MaxBytes is how many bytes the stream keeps, the oldest messages discarded first; 0
	// keeps them until other limits apply.
	MaxBytes int64
	// Compression is the stream's storage compression (jetstream.NoCompression by default).
	Compression jetstream.StoreCompression
	// Resources are the resources relayed: an existing stream must hold the smallest event
	// of each (see smallestEvent). None: a minimal core resource is assumed.
	Resources []Resource
	// MaxPayload is the server's max_payload; an existing stream with a lower max_msg_size
	// is reported (events larger than it go out without body).
	MaxPayload int
}

// ErrStreamUnusable is returned when an existing stream cannot hold the relay's events.
var ErrStreamUnusable = errors.New("stream unusable")

// EnsureStream creates the stream if it does not exist, and warns when it creates one with
// neither max age nor max bytes. An existing stream is used as it is, never changed: it must
// capture the relay's subjects and acknowledge publishes; differences in replicas, duplicate
// window, max age, max bytes or compression are logged as warnings.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	subject := event.StreamSubject(cfg.Prefix, cfg.Cluster)
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        cfg.Name,
			Description: "Kubernetes object changes relayed by kube-nats-relay",
			Subjects:    []string{subject},
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  cfg.Duplicates,
			MaxAge:      cfg.MaxAge,
			MaxBytes:    cfg.MaxBytes,
			Compression: cfg.Compression,
		})
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		zerolog.Ctx(ctx).Info().Str("stream", cfg.Name).Str("subjects", subject).Msg("stream created")
		if cfg.MaxAge == 0 && cfg.MaxBytes == 0 {
			zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).
				Msg("stream created without limits: it keeps every event and grows until the server's storage limits refuse publishes; set RELAY_MAX_AGE or RELAY_MAX_BYTES (or give the stream limits with nats stream edit)")
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", cfg.Name, err)
	}
	info := s.CachedInfo()
	var problems []string
	if !Captures(info.Config.Subjects, cfg.Prefix, cfg.Cluster) {
		problems = append(problems, fmt.Sprintf("its subjects %v do not capture %s", info.Config.Subjects, subject))
	}
	if info.Config.NoAck {
		problems = append(problems, "it does not acknowledge publishes (no_ack)")
	}
	if info.Config.Sealed {
		problems = append(problems, "it is sealed (accepts no messages)")
	}
	if limit := int(info.Config.MaxMsgSize); limit > 0 {
		if floor := smallestEvent(cfg); limit < floor {
			problems = append(problems, fmt.Sprintf("its max_msg_size %d is below the smallest event (%d bytes: the headers of an event without body)", limit, floor))
		} else if cfg.MaxPayload > 0 && limit < cfg.MaxPayload {
			zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).Int("max_msg_size", limit).Int("max_payload", cfg.MaxPayload).
				Msg("existing stream has a max_msg_size below the server's max_payload: larger events go out without body")
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: stream %s exists but %s", ErrStreamUnusable, cfg.Name, strings.Join(problems, "; "))
	}
	if info.Config.Replicas != cfg.Replicas {
		zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).Int("have", info.Config.Replicas).Int("configured", cfg.Replicas).
			Msg("existing stream has other replicas, left as is")
	}
	if info.Config.Duplicates != cfg.Duplicates {
		zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).Stringer("have", info.Config.Duplicates).Stringer("configured", cfg.Duplicates).
			Msg("existing stream has another duplicate window, left as is")
	}
	if info.Config.MaxAge != cfg.MaxAge {
		zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).Stringer("have", info.Config.MaxAge).Stringer("configured", cfg.MaxAge).
			Msg("existing stream has another max age, left as is")
	}
	// nats-server stores an unlimited max bytes as -1.
	if have := max(info.Config.MaxBytes, 0); have != cfg.MaxBytes {
		zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).Int64("have", have).Int64("configured", cfg.MaxBytes).
			Msg("existing stream has another max bytes, left as is")
	}
	if info.Config.Compression != cfg.Compression {
		zerolog.Ctx(ctx).Warn().Str("stream", cfg.Name).Stringer("have", info.Config.Compression).Stringer("configured", cfg.Compression).
			Msg("existing stream has another compression, left as is")
	}
	return s, nil
}

// smallestEvent returns the size the stream counts (headers and body) of the smallest event
// the relay can publish for cfg's resources: the reference (no body) it sends when the stream
// refuses the event of a change to a cluster-scoped object with a one-character name and
// resourceVersion. A stream whose max_msg_size is below it refuses every event.
func smallestEvent(cfg StreamConfig) int {
	resources := cfg.Resources
	if len(resources) == 0 {
		resources = []Resource{{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "r"}, Kind: "R"}}
	}
	floor := 0
	for i, r := range resources {
		meta := event.Meta{
			Cluster: cfg.Cluster, Group: r.Group, Version: r.Version, Resource: r.Resource, Kind: r.Kind,
			Name: "a", UID: "00000000-0000-0000-0000-000000000000", ResourceVersion: "1",
			Type: event.Added, Origin: event.Live, Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		}
		h := meta.Header()
		// The reference a stream refusal leads to; "oversize" is shorter, but only an
		// object over max_payload gets it.
		h.Set(event.HeaderBodyOmitted, event.BodyOmittedStreamLimit)
		if n := event.HeaderSize(h); i == 0 || n < floor {
			floor = n
		}
	}
	return floor
}

// Captures reports whether a stream with the filters subjects captures every event subject of
// the relay with prefix and cluster (event.StreamSubject).
func Captures(subjects []string, prefix, cluster string) bool {
	subject := event.StreamSubject(prefix, cluster)
	return slices.ContainsFunc(subjects, func(f string) bool { return subjectCovers(f, subject) })
}

// subjectCovers reports whether the stream filter f captures every subject matched by s.
func subjectCovers(f, s string) bool {
	ft, st := strings.Split(f, "."), strings.Split(s, ".")
	for i, tok := range ft {
		if tok == ">" {
			return i < len(st)
		}
		if i >= len(st) {
			return false
		}
		if st[i] == ">" {
			return false
		}
		if tok != "*" && tok != st[i] {
			return false
		}
		if tok == "*" && st[i] == "" {
			return false
		}
	}
	return len(ft) == len(st)
}

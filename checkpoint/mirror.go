package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// MirrorConfig is the bucket of the state mirror.
type MirrorConfig struct {
	// Bucket is the KV bucket name.
	Bucket string
	// Replicas is the bucket's replica count when the mirror creates it.
	Replicas int
	// Cluster is the relay's cluster and Resources the resources it mirrors. The bucket's
	// stream metadata lists them under event.MirroredMetadataKey(Cluster), so that a consumer
	// tells a mirrored resource without objects from one that is not mirrored.
	Cluster   string
	Resources []schema.GroupResource
}

// ErrMirroredChanging reports a mirror bucket whose list of mirrored resources other writers
// kept changing while the relay wrote its own.
var ErrMirroredChanging = errors.New("mirror bucket metadata changed concurrently")

// Mirror is the state mirror: for every object of the mirrored resources, its current state
// (the event body) under event.MirrorKey; a deleted object's key is purged. Services that start
// late bootstrap from it instead of listing the apiserver (see the consumer package).
type Mirror struct {
	prefix string // subject prefix of a write of the bucket's keys (kvPutPrefix)
	js     jetstream.JetStream
	stream string // the bucket's stream
	key    string // this cluster's metadata key (event.MirroredMetadataKey)
	listed string // this cluster's list of mirrored resources (event.FormatMirrored)
}

// OpenMirror returns the mirror over the bucket, creating it when missing with the list of
// mirrored resources in its metadata. A bucket that exists may lack the list or hold an older
// one: Mirror.RecordResources writes it.
func OpenMirror(ctx context.Context, js jetstream.JetStream, cfg MirrorConfig) (*Mirror, error) {
	tokens := make([]string, 0, len(cfg.Resources))
	for _, gr := range cfg.Resources {
		tokens = append(tokens, event.MirroredToken(gr))
	}
	m := &Mirror{js: js, stream: kvStreamPrefix + cfg.Bucket, key: event.MirroredMetadataKey(cfg.Cluster), listed: event.FormatMirrored(tokens)}
	_, prefix, err := openTTLBucket(ctx, js, cfg.Bucket, "kube-nats-relay state mirror: the current state of every mirrored object", cfg.Replicas,
		map[string]string{m.key: m.listed})
	if err != nil {
		return nil, err
	}
	m.prefix = prefix
	return m, nil
}

// mirroredWrites is how often RecordResources writes the list before it gives up on writers
// that keep replacing the bucket's metadata: once, and once more after a concurrent change.
const mirroredWrites = 2

// RecordResources makes the bucket's stream metadata list this cluster's mirrored resources
// (MirrorConfig.Resources), keeping every other key, among them other clusters' lists. It
// writes nothing when the list is there already. A stream update replaces the whole
// metadata, so after writing it reads the metadata again: when a concurrent writer dropped
// the list, it writes once more, then fails with ErrMirroredChanging. It needs the grant of
// $JS.API.STREAM.UPDATE.<bucket's stream> only when it writes.
func (m *Mirror) RecordResources(ctx context.Context) error {
	for writes := 0; ; writes++ {
		s, err := m.js.Stream(ctx, m.stream)
		if err != nil {
			return fmt.Errorf("list mirrored resources in %s: %w", m.stream, err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Metadata[m.key] == m.listed {
			return nil
		}
		if writes == mirroredWrites {
			return fmt.Errorf("list mirrored resources in %s: %w", m.stream, ErrMirroredChanging)
		}
		md := maps.Clone(cfg.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		md[m.key] = m.listed
		cfg.Metadata = md
		if _, err := m.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("list mirrored resources in %s: %w", m.stream, err)
		}
	}
}

// Record returns the message that sets the object's state to body, or purges the object when
// body is nil. The caller publishes it to JetStream.
func (m *Mirror) Record(meta event.Meta, body []byte) *nats.Msg {
	subject := m.prefix + event.MirrorKey(meta.Cluster, meta.GroupVersionResource().GroupResource(), meta.Namespace, meta.Name)
	if body == nil {
		return purgeMsg(subject)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	return msg
}

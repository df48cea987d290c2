package checkpoint

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// MirrorConfig is the bucket of the state mirror.
type MirrorConfig struct {
	// Bucket is the KV bucket name.
	Bucket string
	// Replicas is the bucket's replica count when the mirror creates it.
	Replicas int
}

// Mirror is the state mirror: for every object of the mirrored resources, its current state
// (the event body) under event.MirrorKey; a deleted object's key is purged. Services that start
// late bootstrap from it instead of listing the apiserver (see the consumer package).
type Mirror struct {
	prefix string // "$KV.<bucket>."
}

// OpenMirror returns the mirror over the bucket, creating it when missing.
func OpenMirror(ctx context.Context, js jetstream.JetStream, cfg MirrorConfig) (*Mirror, error) {
	if _, err := openTTLBucket(ctx, js, cfg.Bucket, "kube-nats-relay state mirror: the current state of every mirrored object", cfg.Replicas); err != nil {
		return nil, err
	}
	return &Mirror{prefix: "$KV." + cfg.Bucket + "."}, nil
}

// Record returns the message that sets the object's state to body, or purges the object when
// body is nil. The caller publishes it to JetStream.
func (m *Mirror) Record(meta event.Meta, body []byte) *nats.Msg {
	subject := m.prefix + event.MirrorKey(meta.Cluster, meta.Group, meta.Resource, meta.Namespace, meta.Name)
	if body == nil {
		return purgeMsg(subject)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	return msg
}

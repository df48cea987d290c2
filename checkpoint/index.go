package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// purgeMarkerTTL is how long the marker of a removed index entry lives. The purge removes
// the entry's history at once; the marker only tells watchers of the bucket that the key went
// away, so it need not outlive any watcher's catch-up.
const purgeMarkerTTL = 15 * time.Minute

// IndexConfig is the bucket the object index is kept in.
type IndexConfig struct {
	// Bucket is the KV bucket name.
	Bucket string
	// Replicas is the bucket's replica count when the index creates it.
	Replicas int
}

// Index is the durable per-object index: for every object a source published, the uid and
// resourceVersion of the last published change. Keys are <source>.<namespace>.<name>, the
// source key with its dots replaced by '/', so that one source's keys never match another's
// filter; values are "<uid> <resourceVersion>".
type Index struct {
	kv     jetstream.KeyValue
	prefix string // subject prefix of the bucket's keys: "$KV.<bucket>."
}

// OpenIndex returns the index over the bucket, creating it when missing.
func OpenIndex(ctx context.Context, js jetstream.JetStream, cfg IndexConfig) (*Index, error) {
	kv, err := openTTLBucket(ctx, js, cfg.Bucket, "kube-nats-relay object index: uid and resourceVersion last published per object", cfg.Replicas)
	if err != nil {
		return nil, err
	}
	return &Index{kv: kv, prefix: "$KV." + cfg.Bucket + "."}, nil
}

// Load calls fn for every object recorded under source.
func (ix *Index) Load(ctx context.Context, source string, fn func(object, uid, rv string)) error {
	w, err := ix.kv.WatchFiltered(ctx, []string{sourceToken(source) + ".>"}, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("load index of %s: %w", source, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("load index of %s: watcher closed", source)
			}
			if e == nil {
				return nil // every current value delivered
			}
			object, err := objectFromKey(strings.TrimPrefix(e.Key(), sourceToken(source)+"."))
			if err != nil {
				return fmt.Errorf("load index of %s: key %q: %w", source, e.Key(), err)
			}
			uid, rv, ok := strings.Cut(string(e.Value()), " ")
			if !ok {
				return fmt.Errorf("load index of %s: key %q: bad value %q", source, e.Key(), e.Value())
			}
			fn(object, uid, rv)
		}
	}
}

// Record returns the message that records object's last published change (uid at rv), or
// removes the object when uid is empty. The caller publishes it to JetStream like an event,
// after the event's own ack.
func (ix *Index) Record(source, object, uid, rv string) *nats.Msg {
	subject := ix.prefix + sourceToken(source) + "." + objectKey(object)
	if uid == "" {
		return purgeMsg(subject)
	}
	m := nats.NewMsg(subject)
	m.Data = []byte(uid + " " + rv)
	return m
}

// openTTLBucket opens the one-value-per-key bucket, creating it when missing, with
// per-message TTLs so that the markers of purged keys expire (purgeMarkerTTL) instead of one
// marker per removed object staying forever.
func openTTLBucket(ctx context.Context, js jetstream.JetStream, bucket, description string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         bucket,
			Description:    description,
			Storage:        jetstream.FileStorage,
			Replicas:       max(replicas, 1),
			History:        1,
			LimitMarkerTTL: purgeMarkerTTL,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	if s, ok := status.(*jetstream.KeyValueBucketStatus); ok && !s.StreamInfo().Config.AllowMsgTTL {
		return nil, fmt.Errorf("%w: bucket %s exists without per-message TTL (create it with a limit marker TTL, nats-server 2.11 or later)", ErrBucketUnusable, bucket)
	}
	if err := checkLimits(ctx, kv, bucket, smallestRecord(), true); err != nil {
		return nil, err
	}
	return kv, nil
}

// purgeMsg returns the message that purges subject's key, leaving a marker that expires.
func purgeMsg(subject string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Header.Set(jetstream.MsgTTLHeader, purgeMarkerTTL.String())
	return m
}

// sourceToken turns a source key into one KV key token.
func sourceToken(source string) string { return strings.ReplaceAll(source, ".", "/") }

// objectKey writes "namespace/name" (or "name") as two key tokens: namespace ("_" for
// cluster-scoped objects) and name (event.EncodeKeyToken).
func objectKey(object string) string {
	ns, name, ok := strings.Cut(object, "/")
	if !ok {
		ns, name = "", object
	}
	if ns == "" {
		return "_." + event.EncodeKeyToken(name)
	}
	return event.EncodeKeyToken(ns) + "." + event.EncodeKeyToken(name)
}

func objectFromKey(key string) (string, error) {
	nsTok, nameTok, ok := strings.Cut(key, ".")
	if !ok {
		return "", errors.New("want <namespace>.<name>")
	}
	name, err := event.DecodeKeyToken(nameTok)
	if err != nil {
		return "", err
	}
	if nsTok == "_" {
		return name, nil
	}
	ns, err := event.DecodeKeyToken(nsTok)
	if err != nil {
		return "", err
	}
	return ns + "/" + name, nil
}

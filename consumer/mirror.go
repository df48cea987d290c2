package consumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Snapshot is the state mirror's content together with the point of the event stream to
// follow it from. The relay writes an object's mirror entry before publishing its event, so
// every change that is not in Objects has its event at or after NextSequence. Events from
// NextSequence on may repeat states already in Objects: apply them as upserts keyed by uid,
// ignoring a resourceVersion not newer than the one held (event.Meta.ResourceVersion, compared
// as integers for one resource).
type Snapshot struct {
	// Objects maps each mirrored object's key (event.MirrorKey) to its JSON state.
	Objects map[string][]byte
	// NextSequence is the stream sequence to start following from (DeliverFromSequence).
	NextSequence uint64
}

// Bootstrap reads the state mirror (bucket, RELAY_MIRROR_BUCKET) for the keys matching
// keyFilters (event.MirrorFilter; none: every key), and the position of stream
// (RELAY_STREAM) to follow it from, so that a service starting late learns the current state
// without listing the apiserver and then misses no change.
func Bootstrap(ctx context.Context, js jetstream.JetStream, bucket, stream string, keyFilters ...string) (Snapshot, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: stream %s: %w", bucket, stream, err)
	}
	// The position first: any change whose mirror entry is written after this point has its
	// event after it too.
	info, err := s.Info(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: stream %s: %w", bucket, stream, err)
	}
	snap := Snapshot{Objects: make(map[string][]byte), NextSequence: info.State.LastSeq + 1}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, err)
	}
	if len(keyFilters) == 0 {
		keyFilters = []string{">"}
	}
	w, err := kv.WatchFiltered(ctx, keyFilters, jetstream.IgnoreDeletes())
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return Snapshot{}, fmt.Errorf("bootstrap from %s: watcher closed", bucket)
			}
			if e == nil {
				return snap, nil // every current value delivered
			}
			snap.Objects[e.Key()] = e.Value()
		}
	}
}

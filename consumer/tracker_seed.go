package consumer

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Seed records the objects of a state mirror snapshot as applied, so that a Tracker that
// follows the stream from snap.NextSequence (where events may repeat a state the snapshot
// already holds) says Stale to those repeats and Apply only to newer changes: the snapshot and
// the stream then obey one rule. An object the tracker holds at the same or a newer
// resourceVersion keeps its state. Call it once the snapshot's objects are stored, as Record
// after the work of an event.
func (t *Tracker) Seed(ctx context.Context, snap Snapshot) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, en := range snap.Entries {
		key, err := entryObjectKey(en)
		if err != nil {
			return fmt.Errorf("seed tracker: mirror entry %s: %w", en.Key, err)
		}
		if _, err := ParseResourceVersion(en.ResourceVersion); err != nil {
			return fmt.Errorf("seed tracker: mirror entry %s: %w", en.Key, err)
		}
		s, ok, err := t.store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("seed tracker: read state of %s: %w", key, err)
		}
		if ok {
			c, err := CompareResourceVersions(en.ResourceVersion, s.ResourceVersion)
			if err != nil {
				return fmt.Errorf("seed tracker: state of %s: %w", key, err)
			}
			if c <= 0 {
				continue
			}
		}
		if err := t.store.Put(ctx, key, TrackedState{ResourceVersion: en.ResourceVersion}); err != nil {
			return fmt.Errorf("seed tracker: write state of %s: %w", key, err)
		}
	}
	return nil
}

// entryObjectKey returns the ObjectKey of a mirror entry: the cluster and resource from its
// key (<cluster>.<group>.<resource>.<namespace>.<name>, event.MirrorKey; a cluster and a
// resource are never long enough to be hashed), the group from its apiVersion, which is
// exact however long the group.
func entryObjectKey(en Entry) (ObjectKey, error) {
	toks := strings.Split(en.Key, ".")
	if len(toks) != 5 {
		return ObjectKey{}, fmt.Errorf("not a mirror key")
	}
	cluster, err := event.DecodeKeyToken(toks[0])
	if err != nil {
		return ObjectKey{}, fmt.Errorf("cluster token: %w", err)
	}
	resource, err := event.DecodeKeyToken(toks[2])
	if err != nil {
		return ObjectKey{}, fmt.Errorf("resource token: %w", err)
	}
	gv, err := schema.ParseGroupVersion(en.APIVersion)
	if err != nil {
		return ObjectKey{}, fmt.Errorf("apiVersion %q: %w", en.APIVersion, err)
	}
	if en.UID == "" {
		return ObjectKey{}, fmt.Errorf("no uid")
	}
	return ObjectKey{Cluster: cluster, Group: gv.Group, Resource: resource, UID: en.UID}, nil
}

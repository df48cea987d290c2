package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KVStore is a TrackerStore in a JetStream key-value bucket: one key per object
// (ObjectKey.String()), its value the TrackedState as JSON. It survives the service's
// restart and is shared by the instances of a service that read one durable consumer, as
// long as they do not handle the same object at once (MaxAckPending(1), or one instance).
//
// Tombstones stay in the bucket until PruneTombstones removes them (the Tracker already
// ignores one older than its TTL): call it now and then, e.g. once per TTL.
type KVStore struct {
	kv jetstream.KeyValue
}

// NewKVStore returns a KVStore over kv (jetstream.JetStream.CreateOrUpdateKeyValue makes
// one; a history of 1 is enough).
func NewKVStore(kv jetstream.KeyValue) *KVStore { return &KVStore{kv: kv} }

// Get returns the state stored for key.
func (s *KVStore) Get(ctx context.Context, key ObjectKey) (TrackedState, bool, error) {
	e, err := s.kv.Get(ctx, key.String())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return TrackedState{}, false, nil
	}
	if err != nil {
		return TrackedState{}, false, fmt.Errorf("get %s from bucket %s: %w", key, s.kv.Bucket(), err)
	}
	var st TrackedState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return TrackedState{}, false, fmt.Errorf("state %s in bucket %s: %w", key, s.kv.Bucket(), err)
	}
	return st, true, nil
}

// Put stores the state of key.
func (s *KVStore) Put(ctx context.Context, key ObjectKey, st TrackedState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state %s: %w", key, err)
	}
	if _, err := s.kv.Put(ctx, key.String(), data); err != nil {
		return fmt.Errorf("put %s in bucket %s: %w", key, s.kv.Bucket(), err)
	}
	return nil
}

// PruneTombstones deletes the tombstones written before the given time (now minus the
// Tracker's TTL) and returns how many. It reads every key of the bucket; a key written
// meanwhile is left alone (the delete is conditional on the revision read).
func (s *KVStore) PruneTombstones(ctx context.Context, before time.Time) (int, error) {
	lister, err := s.kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list keys of bucket %s: %w", s.kv.Bucket(), err)
	}
	defer func() { _ = lister.Stop() }()
	n := 0
	for k := range lister.Keys() {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("get %s from bucket %s: %w", k, s.kv.Bucket(), err)
		}
		var st TrackedState
		if json.Unmarshal(e.Value(), &st) != nil || !st.Deleted || !st.DeletedAt.Before(before) {
			continue
		}
		err = s.kv.Delete(ctx, k, jetstream.LastRevision(e.Revision()))
		if err != nil && !casConflict(err) {
			return n, fmt.Errorf("delete %s from bucket %s: %w", k, s.kv.Bucket(), err)
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}

// casConflict reports an error of a write conditional on a revision that another write
// changed meanwhile.
func casConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Compile-time check that KVStore is a TrackerStore.
var _ TrackerStore = (*KVStore)(nil)

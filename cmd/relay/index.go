package main

import (
	"context"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// objectIndex is the checkpoint package's index as the relay engine declares it: Load returns
// the source's journal as a relay.IndexJournal.
type objectIndex struct{ *checkpoint.Index }

var _ relay.ObjectIndex = objectIndex{}

// Load loads source's index and returns its journal.
func (ix objectIndex) Load(ctx context.Context, source string, fn func(object, uid, rv string, held []string)) (relay.IndexJournal, error) {
	j, err := ix.Index.Load(ctx, source, fn)
	if err != nil {
		return nil, err
	}
	return j, nil
}

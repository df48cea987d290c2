package main

import (
	"context"
	"errors"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// trackedHistory keeps the sources' history epochs in the checkpoint store, with their
// checkpoints, and reports a conflict as a checkpoint save does (see trackedCheckpoints).
type trackedHistory struct {
	store *checkpoint.Store
	ckpts *trackedCheckpoints
}

var _ relay.HistoryKeeper = trackedHistory{}

func (h trackedHistory) LoadHistory(ctx context.Context, key string) (uint64, string, error) {
	return h.store.LoadHistory(ctx, key)
}

func (h trackedHistory) SaveHistory(ctx context.Context, key, rv string, epoch uint64) error {
	err := h.store.SaveHistory(ctx, key, rv, epoch)
	var conflict relay.ConflictError
	switch {
	case err == nil:
		h.ckpts.mark(key)
	case errors.As(err, &conflict) && conflict.Conflict() && h.ckpts.onConflict != nil:
		h.ckpts.onConflict(err)
	}
	return err
}

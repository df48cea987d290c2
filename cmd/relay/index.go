package main

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// objectIndex is the checkpoint package's index as the relay engine declares it: Load returns
// the source's journal as a relay.IndexJournal. A journal that finds its segments or snapshot
// written by another journal of the source (a second relay, a late write of an old leader)
// reports it to ckpts' onConflict, which stops the relay as a checkpoint conflict does.
type objectIndex struct {
	*checkpoint.Index
	ckpts *trackedCheckpoints
	// denials fails a segment the server refuses with a permissions violation at once.
	denials *relay.Denials
}

var _ relay.ObjectIndex = objectIndex{}

// Load loads source's index and returns its journal.
func (ix objectIndex) Load(ctx context.Context, source string, fn func(object, uid, rv string, held []string)) (relay.IndexJournal, error) {
	j, err := ix.Index.Load(ctx, source, fn)
	if err != nil {
		ix.conflict(err)
		return nil, err
	}
	if ix.denials != nil {
		j.WatchDenials(ix.denials.Watch)
	}
	return conflictReporting{Journal: j, conflict: ix.conflict}, nil
}

// conflict reports err to onConflict when it is a conflict.
func (ix objectIndex) conflict(err error) {
	if ix.ckpts != nil && ix.ckpts.onConflict != nil && errors.Is(err, checkpoint.ErrConflict) {
		ix.ckpts.onConflict(err)
	}
}

// conflictReporting is a journal whose conflicts are reported (see objectIndex).
type conflictReporting struct {
	*checkpoint.Journal
	conflict func(error)
}

// Write writes rec through the journal, reporting a conflict before done sees it.
func (j conflictReporting) Write(rec *nats.Msg, done func(error)) {
	j.Journal.Write(rec, func(err error) {
		if err != nil {
			j.conflict(err)
		}
		done(err)
	})
}

// Run compacts the journal, reporting a conflict.
func (j conflictReporting) Run(ctx context.Context) error {
	err := j.Journal.Run(ctx)
	if err != nil {
		j.conflict(err)
	}
	return err
}

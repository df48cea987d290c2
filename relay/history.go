package relay

import (
	"context"
	"errors"
	"fmt"
)

// HistoryKeeper keeps each source's history epoch (event.Meta.History) with its checkpoint.
// An etcd restored from a snapshot without a revision bump hands out resourceVersions again
// that it handed out before, to the same objects (same uids): a change after the restore would
// get the id of an earlier change, and JetStream would drop it as a duplicate. So when the
// intake finds its resume point ahead of the cluster, the source moves to the next epoch, which
// is an input of every id from then on.
type HistoryKeeper interface {
	// LoadHistory returns the epoch saved under key and the checkpoint it began at (0 and ""
	// when none was saved).
	LoadHistory(ctx context.Context, key string) (epoch uint64, at string, err error)
	// SaveHistory saves epoch under key, durably, with rv as both the checkpoint and the
	// checkpoint the epoch began at; later checkpoint saves keep it.
	SaveHistory(ctx context.Context, key, rv string, epoch uint64) error
}

// loadHistory reads the source's epoch at start.
func (s *Source) loadHistory(ctx context.Context) error {
	if s.hist == nil {
		return nil
	}
	epoch, at, err := s.hist.LoadHistory(ctx, s.key)
	if err != nil {
		return fmt.Errorf("load history epoch %q: %w", s.key, err)
	}
	s.history.Store(epoch)
	s.historyAt = at
	return nil
}

// beginHistory moves the source to the next history epoch after its resume point was found
// ahead of the cluster (fallback is that resume point). Every change queued before is acked
// first (a drain mark), so that no event of the old epoch is still in flight and no checkpoint
// of the old history is saved after the new epoch: the epoch is saved with the checkpoint
// then current, before any event carries it.
//
// A restore is counted once: when the epoch already began at the checkpoint now current,
// nothing moved since (the relay stopped, or lost its lease, before the relist that follows
// the restore ended), and the relist carries on in the same epoch, so that its events keep
// the ids they had. (So a second restore found when the checkpoint is again exactly the one the
// epoch began at is not counted; the checkpoint cannot tell the two apart.) An intake without a
// checkpoint saver (tests of the intake alone) only
// counts in memory.
func (in *intake) beginHistory(ctx context.Context, fallback string) error {
	s, c := in.src, in.cp
	if c == nil {
		s.historyAt = fallback
		s.history.Add(1)
		return nil
	}
	drain := &item{retired: make(chan struct{})}
	if err := in.send(ctx, drain); err != nil {
		return err
	}
	select {
	case <-drain.retired:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	at := c.latest
	c.mu.Unlock()
	if at == "" {
		at = fallback
	}
	epoch := s.history.Load()
	if epoch > 0 && at == s.historyAt {
		in.log.Warn().Uint64("history", epoch).Str("checkpoint_rv", at).
			Msg("history epoch already begun at this checkpoint (a restart before the relist ended): keeping it")
		return nil
	}
	next := epoch + 1
	if s.hist != nil {
		if err := s.hist.SaveHistory(ctx, s.key, at, next); err != nil {
			var conflict ConflictError
			if errors.As(err, &conflict) && conflict.Conflict() && c.fail != nil {
				in.log.Error().Err(err).Str("rv", at).Msg("checkpoint written by another relay: stopping this resource")
				c.fail(err)
			}
			return err
		}
		c.saved = at
	}
	s.historyAt = at
	s.history.Store(next)
	in.log.Warn().Uint64("history", next).Str("checkpoint_rv", at).
		Msg("history epoch begun: the cluster hands out resourceVersions again, events now carry k8s-history and ids of their own")
	return nil
}

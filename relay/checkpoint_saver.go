package relay

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/utils/clock"
)

// Checkpointer loads and saves the resourceVersion a source resumes from.
type Checkpointer interface {
	// Load returns the saved resourceVersion, or ok=false when there is none.
	Load(ctx context.Context, key string) (rv string, ok bool, err error)
	// Save records rv for key.
	Save(ctx context.Context, key, rv string) error
}

// ConflictError is implemented by a Checkpointer's error when the checkpoint was written by
// another writer: the source stops rather than fight over it.
type ConflictError interface {
	error
	Conflict() bool
}

// checkpointSaver writes the latest acked resourceVersion: at most once per interval, at once
// when asked to (bookmarks, list end), and a last time after the pipeline has drained.
type checkpointSaver struct {
	ckpt     Checkpointer
	key      string
	interval time.Duration
	clock    clock.WithTicker

	mu     sync.Mutex
	latest string
	urgent chan struct{}
	saved  string
	// saveMu is held by each save and by beginHistory; fail stops the source on a conflict.
	saveMu sync.Mutex
	fail   context.CancelCauseFunc
}

// finalSaveBudget is the share of the shutdown timeout kept for writing the final checkpoint.
const finalSaveBudget = time.Second

func newCheckpointSaver(ckpt Checkpointer, key, saved string, interval time.Duration, clk clock.WithTicker) *checkpointSaver {
	return &checkpointSaver{ckpt: ckpt, key: key, interval: interval, clock: clk, latest: saved, saved: saved, urgent: make(chan struct{}, 1)}
}

// advance records rv as acked; called from the pipeline goroutine, never blocks.
func (c *checkpointSaver) advance(rv string, urgent bool) {
	c.mu.Lock()
	c.latest = rv
	c.mu.Unlock()
	if urgent {
		select {
		case c.urgent <- struct{}{}:
		default:
		}
	}
}

// run saves until the pipeline is done, then saves a last time within finalBudget. Failed
// saves are logged and retried at the next tick; a conflict (another writer) is handed to
// fail, which stops the source.
func (c *checkpointSaver) run(ctx, base context.Context, pipelineDone <-chan struct{}, finalBudget time.Duration, fail context.CancelCauseFunc, log zerolog.Logger) {
	tick := c.clock.NewTicker(c.interval)
	defer tick.Stop()
	save := func(ctx context.Context) bool {
		c.saveMu.Lock()
		defer c.saveMu.Unlock()
		c.mu.Lock()
		rv := c.latest
		c.mu.Unlock()
		if rv == c.saved || rv == "" {
			return true
		}
		if err := c.ckpt.Save(ctx, c.key, rv); err != nil {
			var conflict ConflictError
			if errors.As(err, &conflict) && conflict.Conflict() {
				log.Error().Err(err).Str("rv", rv).Msg("checkpoint written by another relay: stopping this resource")
				fail(err)
				return false
			}
			log.Warn().Err(err).Str("rv", rv).Msg("save checkpoint failed, will retry")
			return false
		}
		c.saved = rv
		log.Debug().Str("rv", rv).Msg("checkpoint saved")
		return true
	}
	for {
		select {
		case <-pipelineDone:
			fctx, cancel := context.WithTimeout(base, finalBudget)
			defer cancel()
			if save(fctx) {
				log.Info().Str("rv", c.saved).Msg("final checkpoint")
			} else {
				log.Warn().Str("rv", c.saved).Msg("final checkpoint not saved; the next start resumes from the last saved one")
			}
			return
		case <-tick.C():
			save(base)
		case <-c.urgent:
			save(base)
		}
	}
}

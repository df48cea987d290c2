package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
)

// Relay runs a set of sources side by side. A source that fails permanently (forbidden,
// resource gone) is reported and stops alone; the others carry on.
type Relay struct {
	sources    []*Source
	namespaces *Namespaces
}

// New returns a relay over sources.
func New(sources ...*Source) *Relay { return &Relay{sources: sources} }

// WithNamespaces makes Run follow namespace labels with ns (nil: none needed), for the
// sources that select by them.
func (r *Relay) WithNamespaces(ns *Namespaces) *Relay {
	r.namespaces = ns
	return r
}

// NotReady returns why the relay is not ready: every source not yet watching or stopped by
// a permanent error; empty when all are watching.
func (r *Relay) NotReady() []string {
	var reasons []string
	for _, s := range r.sources {
		if ok, why := s.Status(); !ok {
			reasons = append(reasons, why)
		}
	}
	return reasons
}

// ErrAllFailed is returned by Run when every source has stopped with a permanent error.
var ErrAllFailed = errors.New("every resource failed")

// Run runs every source until ctx ends and all of them have shut down (final checkpoints
// written). It returns nil after a normal shutdown, or an error wrapping ErrAllFailed and
// each source's error when no source is left running.
func (r *Relay) Run(ctx context.Context) error {
	log := zerolog.Ctx(ctx)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	if r.namespaces != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.namespaces.Run(ctx)
		}()
	}
	for _, s := range r.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Run(ctx)
			if err == nil {
				return
			}
			log.Error().Err(err).Str("resource", s.describe()).Msg("resource stopped")
			mu.Lock()
			failed = append(failed, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(r.sources) > 0 && len(failed) == len(r.sources) {
		return fmt.Errorf("%w: %w", ErrAllFailed, errors.Join(failed...))
	}
	return nil
}

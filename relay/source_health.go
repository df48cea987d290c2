package relay

import (
	"fmt"
	"time"
)

// BufferFill returns how many items the source's intake buffer holds and its capacity; 0, 0
// before the source runs.
func (s *Source) BufferFill() (used, capacity int) {
	p := s.pipe.Load()
	if p == nil {
		return 0, 0
	}
	return len(p.in), cap(p.in)
}

// Stalled reports, when the source's publishing holds work and has done nothing with it for
// longer than limit, how long; "" otherwise. Publishing that waits for NATS is not stalled:
// every publish ends in an ack, an error or a timeout, and failed ones are retried, so a
// running pipeline acts at least every few seconds while it has work.
func (s *Source) Stalled(limit time.Duration) string {
	p := s.pipe.Load()
	if p == nil {
		return ""
	}
	idle, stalled := p.stalled(limit)
	if !stalled {
		return ""
	}
	used, capacity := s.BufferFill()
	return fmt.Sprintf("%s: publishing has made no progress for %s with %d of %d buffered items waiting",
		s.describe(), idle.Round(time.Second), used, capacity)
}

// Wedged returns a reason for every source whose publishing has stalled for longer than
// limit (see Source.Stalled); empty when none has.
func (r *Relay) Wedged(limit time.Duration) []string {
	var reasons []string
	for _, s := range r.sources {
		if why := s.Stalled(limit); why != "" {
			reasons = append(reasons, why)
		}
	}
	return reasons
}

// Sources returns the relay's sources.
func (r *Relay) Sources() []*Source { return r.sources }

// Resource returns what the source watches: the resource and the namespace ("" for all).
func (s *Source) Resource() (Resource, string) { return s.cfg.Resource, s.cfg.Namespace }

// publishStuckAfter is how long publishing may keep failing before the source reports not
// ready: longer than a NATS leader election or restart.
const publishStuckAfter = 30 * time.Second

// Status reports whether the source is watching, or why not.
func (s *Source) Status() (ready bool, reason string) {
	if err := s.failure.Load(); err != nil {
		return false, s.describe() + ": " + (*err).Error()
	}
	if err := s.watchErr.Load(); err != nil {
		return false, s.describe() + ": " + (*err).Error()
	}
	if !s.synced.Load() {
		if s.namespaces != nil {
			if why := s.namespaces.waiting(); why != "" {
				return false, s.describe() + ": " + why
			}
		}
		return false, s.describe() + ": not watching (listing, or re-opening its watch)"
	}
	if p := s.pipe.Load(); p != nil {
		if since, err := p.failing(); err != nil && s.clock.Since(since) > publishStuckAfter {
			return false, fmt.Sprintf("%s: publishing failing since %s: %v", s.describe(), since.Format(time.RFC3339), err)
		}
	}
	if why := s.undelivered.reason(time.Now()); why != "" {
		return false, s.describe() + ": " + why
	}
	return true, ""
}

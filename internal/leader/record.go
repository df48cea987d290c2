package leader

import (
	"bytes"
	"context"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// tryAcquireOrRenew is client-go's LeaderElector.tryAcquireOrRenew on e's clock: it writes
// the lease record naming this process when the lease is free, expired (by when this
// process saw it change, as LeaseDuration counts), or already this process's, and reports
// whether it did.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	log := zerolog.Ctx(ctx)
	defer e.reportTransition(ctx)
	now := metav1.NewTime(e.clk.Now())
	rec := resourcelock.LeaderElectionRecord{
		HolderIdentity:       e.cfg.Identity,
		LeaseDurationSeconds: int(e.cfg.LeaseDuration / time.Second),
		RenewTime:            now,
		AcquireTime:          now,
	}
	// Fast path: the leader updates the record it wrote last, assuming it is current.
	if old, valid := e.observedRecord(now.Time); valid && old.HolderIdentity == e.cfg.Identity {
		rec.AcquireTime, rec.LeaderTransitions = old.AcquireTime, old.LeaderTransitions
		if err := e.lock.Update(ctx, rec); err == nil {
			e.setObserved(rec)
			return true
		}
	}
	old, raw, err := e.lock.Get(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.Debug().Err(err).Msg("lease not read")
			return false
		}
		if err := e.lock.Create(ctx, rec); err != nil {
			log.Debug().Err(err).Msg("lease not created")
			return false
		}
		e.setObserved(rec)
		return true
	}
	e.mu.Lock()
	if !bytes.Equal(e.observedRaw, raw) {
		e.observed, e.observedRaw, e.observedAt = *old, raw, e.clk.Now()
	}
	e.mu.Unlock()
	observed, valid := e.observedRecord(now.Time)
	mine := observed.HolderIdentity == e.cfg.Identity
	if observed.HolderIdentity != "" && valid && !mine {
		return false
	}
	if mine {
		rec.AcquireTime, rec.LeaderTransitions = old.AcquireTime, old.LeaderTransitions
	} else {
		rec.LeaderTransitions = old.LeaderTransitions + 1
	}
	if err := e.lock.Update(ctx, rec); err != nil {
		log.Debug().Err(err).Msg("lease not updated")
		return false
	}
	e.setObserved(rec)
	return true
}

// observedRecord returns the record last observed and whether its lease is still valid at
// now: LeaseDurationSeconds since it was observed.
func (e *Elector) observedRecord(now time.Time) (resourcelock.LeaderElectionRecord, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	valid := e.observedAt.Add(time.Duration(e.observed.LeaseDurationSeconds) * time.Second).After(now)
	return e.observed, valid
}

// observedHolder returns the holder of the record last observed.
func (e *Elector) observedHolder() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observed.HolderIdentity
}

// setObserved records rec, just written, as observed now.
func (e *Elector) setObserved(rec resourcelock.LeaderElectionRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observed, e.observedAt = rec, e.clk.Now()
}

// reportTransition logs a change of the leader seen.
func (e *Elector) reportTransition(ctx context.Context) {
	e.mu.Lock()
	id := e.observed.HolderIdentity
	changed := id != e.reported
	e.reported = id
	e.mu.Unlock()
	if !changed {
		return
	}
	e.leader.Store(&id)
	log := zerolog.Ctx(ctx)
	if id == e.cfg.Identity {
		log.Info().Msg("became leader")
		return
	}
	log.Info().Str("leader", id).Msg("standing by: another relay leads")
}

// release gives the lease up if this process holds it, as client-go's ReleaseOnCancel does:
// holder cleared and a 1s duration, so that a standby takes over at its next retry.
func (e *Elector) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	log := zerolog.Ctx(ctx)
	rec, _, err := e.lock.Get(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("lease not released: it expires by itself")
		return
	}
	if rec.HolderIdentity != e.cfg.Identity {
		return
	}
	now := metav1.NewTime(e.clk.Now())
	released := resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}
	if err := e.lock.Update(ctx, released); err != nil {
		log.Warn().Err(err).Msg("lease not released: it expires by itself")
		return
	}
	e.setObserved(released)
	log.Info().Msg("lease released")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election, and why a leader that loses its lease cannot overlap with the next one.
//
// The leader renews the Lease every RetryPeriod. When its last successful renewal was sent
// more than RenewDeadline + RetryPeriod ago (12s with the defaults), it gives up: client-go's
// elector reports the loss by then, and watchRenewals checks the same bound itself. A standby
// may take the lease only when LeaseDuration (15s) has passed since it saw the last renewal
// on the apiserver, by its own clock, so the old leader has LeaseDuration - RenewDeadline -
// RetryPeriod (3s) to stop. It needs milliseconds: on losing the lease it closes its NATS
// connection at once (no drain) and resets the socket (natsconn.Conn.Abort), which fails every
// publish, index and checkpoint write it has not yet sent, discards what the client and the
// kernel still buffered, then exits non-zero for Kubernetes to restart it as a fresh standby.
// Config.Validate insists on RenewDeadline + RetryPeriod < LeaseDuration.
//
// A graceful stop (SIGTERM) is the other way round: the leader drains and writes its final
// checkpoints while still holding (and renewing) the lease, and only then releases it, so the
// next leader loads those checkpoints instead of racing them.

// errLeaseLost ends the run of a leader that could not renew its lease.
var errLeaseLost = errors.New("leader election lease lost: stopped publishing at once; restart to stand by")

// errCheckpointConflict ends the run of a leader that found its checkpoint written by
// another process (a late write of the previous leader, or a second relay on the same
// buckets): it stops at once and restarts to load the checkpoint afresh.
var errCheckpointConflict = errors.New("checkpoint written by another relay while leading: stopped publishing at once; restart to reload it")

const (
	// leaseLostGrace bounds the wait for the sources to return after a hard stop: publishing
	// is already impossible (NATS is closed), this only lets them log their end.
	leaseLostGrace = time.Second
	// leaderHealthzTolerance is how long past its lease duration a leader may go without
	// renewing before /healthz fails: it should have exited by then, so something is stuck.
	// 20s is kube-controller-manager's value.
	leaderHealthzTolerance = 20 * time.Second
	// lockObservedWithin says how recently a standby must have read the Lease to count as
	// able to campaign, in retry periods: a few failed reads in a row are a hiccup, more mean
	// the apiserver is out of reach.
	lockObservedWithin = 5
)

// leadership is this process's part in leader election.
type leadership struct {
	cfg   Config
	id    string
	lock  *observedLock
	watch *leaderelection.HealthzAdaptor

	leading atomic.Bool
	// onConflict stops the leader; set while it leads.
	onConflict atomic.Pointer[func(error)]
	// leader is the identity of the current leader as last seen, "" when unknown.
	leader atomic.Pointer[string]
}

// newLeadership prepares the campaign for cfg's Lease; nothing talks to the apiserver yet.
func newLeadership(cfg Config, rc *rest.Config) (*leadership, error) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	l := &leadership{cfg: cfg, id: cfg.LeaderIdentity(), watch: leaderelection.NewLeaderHealthzAdaptor(leaderHealthzTolerance)}
	l.lock = &observedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.LeaseNamespace(), Name: cfg.LeaderElectionLease},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.id},
	}}
	none := ""
	l.leader.Store(&none)
	return l, nil
}

// campaign campaigns and calls relayWhileLeading once the lease is held. It returns:
//   - nil when ctx ends: relayWhileLeading has returned (drained, final checkpoints written)
//     and only then the lease is released, so that the next leader starts where this one
//     stopped;
//   - errLeaseLost when renewing failed: abort was called the moment it did (hard stop);
//   - errCheckpointConflict when conflict was called while leading (abort called too);
//   - relayWhileLeading's error otherwise, after releasing the lease.
//
// relayWhileLeading must return when its context ends.
func (l *leadership) campaign(ctx context.Context, abort func(), relayWhileLeading func(context.Context) error) error {
	log := zerolog.Ctx(ctx).With().Str("lease", l.cfg.LeaseNamespace()+"/"+l.cfg.LeaderElectionLease).Str("identity", l.id).Logger()
	// The elector has a context of its own: it must keep renewing while the relay drains
	// after ctx ended, and release the lease only after that.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	var letGo atomic.Bool // set before this process gives the lease up on purpose
	started := make(chan struct{})
	lost := make(chan struct{})
	var loseOnce sync.Once
	// loseLease is the hard stop: publishing ends now, before anything else happens.
	loseLease := func(why string) {
		loseOnce.Do(func() {
			l.leading.Store(false)
			abort()
			log.Error().Str("why", why).Stringer("renew_deadline", l.cfg.RenewDeadline.Duration).
				Msg("leader election lease lost: stopped publishing")
			close(lost)
		})
	}
	el, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          l.lock,
		Name:          l.cfg.LeaderElectionLease,
		LeaseDuration: l.cfg.LeaseDuration.Duration,
		RenewDeadline: l.cfg.RenewDeadline.Duration,
		RetryPeriod:   l.cfg.RetryPeriod.Duration,
		// Not ReleaseOnCancel: client-go then also tries to release after a failed renewal,
		// for up to RenewDeadline, before it reports the loss, which would eat the margin
		// the hard stop needs. This process releases the lease itself after a graceful stop.
		WatchDog: l.watch,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				l.leading.Store(true)
				close(started)
			},
			OnStoppedLeading: func() {
				// Called once, when the elector ends: on purpose (letGo), or because renewing
				// failed after it had acquired the lease (acquiring alone retries until
				// electCtx ends).
				l.leading.Store(false)
				if letGo.Load() {
					return
				}
				loseLease("renewal failed")
			},
			OnNewLeader: func(id string) {
				l.leader.Store(&id)
				if id == l.id {
					log.Info().Msg("became leader")
					return
				}
				log.Info().Str("leader", id).Msg("standing by: another relay leads")
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	l.watch.SetLeaderElection(el)
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		el.Run(electCtx)
	}()
	release := func() {
		letGo.Store(true)
		stopElecting()
		<-electorDone
		l.release(ctx)
	}
	log.Info().Stringer("lease_duration", l.cfg.LeaseDuration.Duration).Msg("campaigning for the lease")
	select {
	case <-ctx.Done():
		release()
		return nil
	case <-lost: // lost before OnStartedLeading ran: nothing was published
		return errLeaseLost
	case <-started:
	}

	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	relayDone := make(chan error, 1)
	// afterHardStop waits a moment for the relay to notice (it can publish nothing more).
	afterHardStop := func() {
		select {
		case <-relayDone:
		case <-time.After(leaseLostGrace):
		}
	}
	conflicted := make(chan struct{})
	var once sync.Once
	fire := func(err error) {
		once.Do(func() {
			log.Error().Err(err).Msg("checkpoint written by another relay while leading: stopping at once")
			abort()
			stopRun(errCheckpointConflict)
			close(conflicted)
		})
	}
	l.onConflict.Store(&fire)
	go l.watchRenewals(runCtx, loseLease)
	go func() { relayDone <- relayWhileLeading(runCtx) }()
	select {
	case err := <-relayDone:
		// ctx ended and the relay finished its graceful stop, or every source failed:
		// either way hand the lease on now.
		release()
		return err
	case <-conflicted:
		// Nothing can be published any more: hand the lease on without waiting for the
		// relay's drain, which can only fail.
		afterHardStop()
		release()
		return errCheckpointConflict
	case <-lost:
		stopRun(errLeaseLost)
		afterHardStop()
		return errLeaseLost
	}
}

// renewalCheckEvery is how often the leader checks that its lease was renewed recently.
const renewalCheckEvery = 100 * time.Millisecond

// watchRenewals calls lose when the last successful renewal started more than RenewDeadline +
// RetryPeriod ago, until ctx ends. client-go's elector reports the loss by then too; this
// check does not depend on how it sequences its retries, and counts from when the last
// successful write was sent, which is no later than the time the apiserver recorded.
func (l *leadership) watchRenewals(ctx context.Context, lose func(string)) {
	limit := l.cfg.RenewDeadline.Duration + l.cfg.RetryPeriod.Duration
	t := time.NewTicker(renewalCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if since := time.Since(l.lock.lastWritten()); since > limit {
				lose(fmt.Sprintf("no renewal for %s", since.Round(time.Millisecond)))
				return
			}
		}
	}
}

// releaseTimeout bounds giving the lease up at the end of a graceful stop; failing that, the
// lease expires by itself.
const releaseTimeout = 5 * time.Second

// release gives the lease up if this process holds it, as client-go's ReleaseOnCancel does:
// holder cleared and a 1s duration, so that a standby takes over at its next retry.
func (l *leadership) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	log := zerolog.Ctx(ctx)
	rec, _, err := l.lock.Get(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("lease not released: it expires by itself")
		return
	}
	if rec.HolderIdentity != l.id {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := l.lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}); err != nil {
		log.Warn().Err(err).Msg("lease not released: it expires by itself")
		return
	}
	log.Info().Msg("lease released")
}

// conflict is called by the checkpoint store when another process wrote a checkpoint: while
// leading, that stops the relay at once (errCheckpointConflict).
func (l *leadership) conflict(err error) {
	if f := l.onConflict.Load(); f != nil {
		(*f)(err)
	}
}

// isLeader reports whether this process holds the lease.
func (l *leadership) isLeader() bool { return l.leading.Load() }

// role describes the process for /readyz.
func (l *leadership) role() string {
	if l.isLeader() {
		return "leader " + l.id
	}
	leader := *l.leader.Load()
	if leader == "" {
		return "standby " + l.id + " (no leader known)"
	}
	return "standby " + l.id + " (leader " + leader + ")"
}

// standbyNotReady returns why a standby could not take over: it has not read the Lease
// recently (the apiserver is out of reach), so it cannot campaign.
func (l *leadership) standbyNotReady() []string {
	if l.isLeader() {
		return nil
	}
	limit := lockObservedWithin * l.cfg.RetryPeriod.Duration
	last := l.lock.lastSeen()
	if last.IsZero() {
		return []string{"lease: not read yet"}
	}
	if since := time.Since(last); since > limit {
		return []string{fmt.Sprintf("lease: not read for %s, cannot campaign: %v", since.Round(time.Second), l.lock.lastErr())}
	}
	return nil
}

// wedged returns a reason when this process leads but has not renewed its lease for well
// past the lease duration: it should have stopped, so something is stuck.
func (l *leadership) wedged() []string {
	if err := l.watch.Check(nil); err != nil {
		return []string{err.Error()}
	}
	return nil
}

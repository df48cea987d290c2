package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrLeaseLost ends the Run of a leader that could not renew its lease in time, or found it
// taken: abort was called at once, and it must restart to stand by.
var ErrLeaseLost = errors.New("leader election lease lost: stopped publishing at once; restart to stand by")

// ErrFenced is what every *FencedError is (errors.Is): Fence was called while leading.
var ErrFenced = errors.New("fenced while leading")

// FencedError ends the Run of a leader that was fenced: Fence was called with Cause while it
// led. Its message is the cause's: the caller says what it saw.
type FencedError struct {
	Cause error
}

// Error returns the cause's message.
func (e *FencedError) Error() string {
	if e.Cause == nil {
		return ErrFenced.Error()
	}
	return e.Cause.Error()
}

// Unwrap returns the cause given to Fence.
func (e *FencedError) Unwrap() error { return e.Cause }

// Is reports whether target is ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

const (
	// hardStopGrace bounds the wait for lead to return after a hard stop: abort has already
	// made its work impossible, this only lets it log its end.
	hardStopGrace = time.Second
	// healthzTolerance is how long past its lease duration a leader may go without renewing
	// before Wedged reports it: it should have stopped by then, so something is stuck. 20s
	// is kube-controller-manager's value.
	healthzTolerance = 20 * time.Second
	// observedWithin says how recently a standby must have read the Lease to count as able
	// to campaign, in retry periods: a few failed reads in a row are a hiccup, more mean the
	// apiserver is out of reach.
	observedWithin = 5
	// releaseTimeout bounds giving the lease up at the end of a graceful stop; failing that,
	// the lease expires by itself.
	releaseTimeout = 5 * time.Second
)

// Deps are what an Elector works with.
type Deps struct {
	// Leases reads and writes the Lease: a clientset's CoordinationV1(). Required.
	Leases coordinationv1.LeasesGetter
	// Clock times renewals, retries, expiry and the health checks. Nil: the real clock.
	Clock clock.Clock
}

// Elector is this process's part in leader election: one per process, Run once.
type Elector struct {
	cfg  Config // resolved: defaults, namespace and identity filled in
	clk  clock.Clock
	lock *observedLock
	// jitter spreads a standby's tries (wait.Jitter with JitterFactor).
	jitter func(time.Duration) time.Duration

	mu sync.Mutex
	// observed is the lease record as last read or written, observedAt when (by clk), as
	// client-go's LeaderElector keeps them.
	observed    resourcelock.LeaderElectionRecord
	observedRaw []byte
	observedAt  time.Time
	// reported is the leader last logged.
	reported string

	leading atomic.Bool
	// fence stops the leader; set while it leads.
	fence atomic.Pointer[func(error) bool]
	// leader is the identity of the current leader as last seen, "" when unknown.
	leader atomic.Pointer[string]
}

// New validates cfg and prepares the campaign for its Lease, resolving the namespace and
// the identity (see Config); nothing talks to the apiserver yet.
func New(cfg Config, deps Deps) (*Elector, error) {
	return newElector(cfg, deps, serviceAccountNamespaceFile)
}

func newElector(cfg Config, deps Deps, namespaceFile string) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Leases == nil {
		return nil, errors.New("leader election: no Lease client")
	}
	clk := deps.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	cfg = cfg.resolved(namespaceFile)
	e := &Elector{
		cfg:    cfg,
		clk:    clk,
		jitter: func(d time.Duration) time.Duration { return wait.Jitter(d, JitterFactor) },
	}
	e.lock = &observedLock{clk: clk, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     deps.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	none := ""
	e.leader.Store(&none)
	return e, nil
}

// Identity is the identity this process campaigns with.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Lease names the Lease as namespace/name.
func (e *Elector) Lease() string { return e.cfg.Namespace + "/" + e.cfg.Name }

// Run campaigns and calls lead once the lease is held. It returns:
//   - nil when ctx ends before this process leads (the lease is released should a try's
//     write have taken it after all);
//   - lead's error when ctx ends (lead must return then, and may drain first: the lease is
//     renewed meanwhile) or when lead returns by itself; in both cases the lease is released
//     after lead returned, so that the next leader starts where this one stopped;
//   - ErrLeaseLost when renewing failed for RenewDeadline + RetryPeriod or the lease was
//     found taken: abort was called the moment it was known, lead's context ended, and the
//     lease is left alone;
//   - a *FencedError (ErrFenced) when Fence was called while leading: abort was called at
//     once, lead's context ended, and the lease is released without waiting for lead's
//     drain, which can only fail.
//
// After a hard stop Run waits at most hardStopGrace for lead to return.
func (e *Elector) Run(ctx context.Context, lead func(context.Context) error, abort func()) error {
	log := zerolog.Ctx(ctx).With().Str("lease", e.Lease()).Str("identity", e.cfg.Identity).Logger()
	ctx = log.WithContext(ctx)
	log.Info().Stringer("lease_duration", e.cfg.LeaseDuration).Msg("campaigning for the lease")
	if !e.acquire(ctx) {
		// A try whose write the apiserver applied but whose answer was lost may have left
		// the lease naming this process: give it up, as after leading.
		e.release(ctx)
		return nil
	}

	// Renewing has a context of its own: it must go on while lead drains after ctx ended,
	// and stop only before the lease is released.
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRenewing()
	leadCtx, stopLead := context.WithCancelCause(ctx)
	defer stopLead(nil)
	// stopErr is the hard stop's error, set before abort is called: whatever lead returns
	// after that comes from the hard stop.
	var stopErr atomic.Pointer[error]
	stopped := make(chan struct{})
	var once sync.Once
	// hardStop ends leading now, before anything else happens; only the first call counts.
	hardStop := func(err error) bool {
		first := false
		once.Do(func() {
			first = true
			stopErr.Store(&err)
			e.leading.Store(false)
			abort()
			stopLead(err)
			close(stopped)
		})
		return first
	}
	lose := func(why string) {
		if hardStop(ErrLeaseLost) {
			log.Error().Str("why", why).Stringer("renew_deadline", e.cfg.RenewDeadline).
				Msg("leader election lease lost: stopped publishing")
		}
	}
	fence := func(cause error) bool {
		if cause == nil {
			cause = ErrFenced
		}
		return hardStop(&FencedError{Cause: cause})
	}
	e.fence.Store(&fence)
	defer e.fence.Store(nil)
	e.leading.Store(true)

	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		e.renew(renewCtx, lose)
	}()
	led := make(chan error, 1)
	go func() { led <- lead(leadCtx) }()
	release := func() {
		e.leading.Store(false)
		stopRenewing()
		<-renewed
		e.release(ctx)
	}

	select {
	case err := <-led:
		if stopErr.Load() == nil {
			// ctx ended and lead finished its graceful stop, or lead failed: either way
			// hand the lease on now.
			release()
			return err
		}
		<-stopped // lead returned because of a hard stop still under way
	case <-stopped:
		select {
		case <-led:
		case <-time.After(hardStopGrace): // wall time: it waits for lead, not for the election
		}
	}
	err := *stopErr.Load()
	if errors.Is(err, ErrFenced) {
		// Nothing can be done as leader any more: hand the lease on without waiting for
		// lead's drain.
		release()
		return err
	}
	stopRenewing()
	<-renewed
	return err
}

// Fence stops the leader at once, as a lost lease does, and makes Run return a
// *FencedError with cause. The caller calls it when it sees another writer where only the
// leader may write. It reports whether it stopped a leader: false while standing by, and
// after the first call.
func (e *Elector) Fence(cause error) bool {
	if f := e.fence.Load(); f != nil {
		return (*f)(cause)
	}
	return false
}

// IsLeader reports whether this process leads.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Role describes the process for a readiness answer: "leader <identity>", or "standby
// <identity>" with the leader last seen.
func (e *Elector) Role() string {
	if e.IsLeader() {
		return "leader " + e.cfg.Identity
	}
	leader := *e.leader.Load()
	if leader == "" {
		return "standby " + e.cfg.Identity + " (no leader known)"
	}
	return "standby " + e.cfg.Identity + " (leader " + leader + ")"
}

// StandbyNotReady returns why a standby could not take over: it has not read the Lease
// within the last observedWithin retry periods (the apiserver is out of reach), so it cannot
// campaign. It returns nil while leading.
func (e *Elector) StandbyNotReady() []string {
	if e.IsLeader() {
		return nil
	}
	seen, err := e.lock.lastSeen()
	if seen.IsZero() {
		return []string{"lease: not read yet"}
	}
	if since := e.clk.Since(seen); since > observedWithin*e.cfg.RetryPeriod {
		return []string{fmt.Sprintf("lease: not read for %s, cannot campaign: %v", since.Round(time.Second), err)}
	}
	return nil
}

// Wedged returns a reason when the lease record names this process but it has not renewed
// it for healthzTolerance past the lease duration: it should have stopped, so something is
// stuck. It is the health check client-go's HealthzAdaptor makes.
func (e *Elector) Wedged() []string {
	e.mu.Lock()
	holder, at := e.observed.HolderIdentity, e.observedAt
	e.mu.Unlock()
	if holder != e.cfg.Identity {
		return nil
	}
	if e.clk.Since(at) > e.cfg.LeaseDuration+healthzTolerance {
		return []string{"failed election to renew leadership on lease " + e.cfg.Name}
	}
	return nil
}

// acquire tries to acquire the lease every RetryPeriod (jittered) until it holds it (true)
// or ctx ends (false).
func (e *Elector) acquire(ctx context.Context) bool {
	for ctx.Err() == nil {
		if e.tryAcquireOrRenew(ctx) {
			return true
		}
		if !e.sleep(ctx, e.jitter(e.cfg.RetryPeriod)) {
			return false
		}
	}
	return false
}

// renew renews the lease every RetryPeriod until ctx ends. It calls lose, and returns, when
// the last successful renewal was sent RenewDeadline + RetryPeriod ago (a request still in
// flight then is abandoned), or when the lease turns out to be held by another process.
// Counting from when the write was sent, which is no later than the time the apiserver
// recorded, keeps the leader's deadline ahead of any standby's.
func (e *Elector) renew(ctx context.Context, lose func(string)) {
	limit := e.cfg.RenewDeadline + e.cfg.RetryPeriod
	left := func() time.Duration { return limit - e.clk.Since(e.lock.lastWritten()) }
	for {
		l := left()
		if l <= 0 {
			lose(fmt.Sprintf("no renewal for %s", e.clk.Since(e.lock.lastWritten()).Round(time.Millisecond)))
			return
		}
		if !e.sleep(ctx, min(e.cfg.RetryPeriod, l)) {
			return
		}
		if l = left(); l <= 0 {
			continue // lose
		}
		reqCtx, cancel := context.WithTimeout(ctx, l)
		ok := e.tryAcquireOrRenew(reqCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if holder := e.observedHolder(); !ok && holder != "" && holder != e.cfg.Identity {
			lose("lease taken by " + holder)
			return
		}
	}
}

// sleep waits d on the clock; false when ctx ended first.
func (e *Elector) sleep(ctx context.Context, d time.Duration) bool {
	t := e.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

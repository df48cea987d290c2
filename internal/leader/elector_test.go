package leader

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testLease     = "relay"
	testNamespace = "ops"
)

// bed is a Lease in a fake clientset and a fake clock shared by the electors of a test.
type bed struct {
	t   *testing.T
	cs  *fake.Clientset
	clk *clocktesting.FakeClock
	t0  time.Time

	mu sync.Mutex
	// failWrites makes every create or update naming one of these holders fail.
	failWrites map[string]error
	// failReads makes every get fail.
	failReads error
	// writes counts the attempted creates and updates by holder.
	writes map[string]int
}

func newBed(t *testing.T) *bed {
	t.Helper()
	b := &bed{t: t, cs: fake.NewClientset(), t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		failWrites: map[string]error{}, writes: map[string]int{}}
	b.clk = clocktesting.NewFakeClock(b.t0)
	write := func(a k8stesting.Action) (bool, runtime.Object, error) {
		var holder string
		switch a := a.(type) {
		case k8stesting.CreateAction:
			holder = holderOf(a.GetObject())
		case k8stesting.UpdateAction:
			holder = holderOf(a.GetObject())
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.writes[holder]++
		return b.failWrites[holder] != nil, nil, b.failWrites[holder]
	}
	b.cs.PrependReactor("create", "leases", write)
	b.cs.PrependReactor("update", "leases", write)
	b.cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.failReads != nil, nil, b.failReads
	})
	return b
}

func holderOf(o runtime.Object) string {
	if l, ok := o.(*coordv1.Lease); ok && l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}

// elector returns an elector for id with the default durations and no jitter, so that every
// try falls on a multiple of the retry period.
func (b *bed) elector(id string) *Elector {
	b.t.Helper()
	e, err := New(Config{Name: testLease, Namespace: testNamespace, Identity: id}, Deps{Leases: b.cs.CoordinationV1(), Clock: b.clk})
	if err != nil {
		b.t.Fatalf("New: %v", err)
	}
	e.jitter = func(d time.Duration) time.Duration { return d }
	return e
}

func (b *bed) setFailWrites(holder string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failWrites[holder] = err
}

func (b *bed) setFailReads(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failReads = err
}

func (b *bed) writesBy(holder string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes[holder]
}

// lease returns the Lease as stored.
func (b *bed) lease() *coordv1.Lease {
	b.t.Helper()
	b.mu.Lock()
	fail := b.failReads
	b.failReads = nil
	b.mu.Unlock()
	defer b.setFailReads(fail)
	l, err := b.cs.CoordinationV1().Leases(testNamespace).Get(context.Background(), testLease, metav1.GetOptions{})
	if err != nil {
		b.t.Fatalf("get lease: %v", err)
	}
	return l
}

// now returns the fake time since the test began.
func (b *bed) now() time.Duration { return b.clk.Since(b.t0) }

// step moves the fake clock by d and waits until want timers wait on it again: every
// elector that woke has done its try and waits for the next.
func (b *bed) step(d time.Duration, want int) {
	b.t.Helper()
	if !b.tryStep(d, want) {
		b.t.FailNow()
	}
}

// tryStep is step for other goroutines than the test's: it reports failure instead of
// ending the test.
func (b *bed) tryStep(d time.Duration, want int) bool {
	b.t.Helper()
	b.clk.Step(d)
	return b.tryWaitFor("timers waiting", func() bool { return b.clk.Waiters() == want })
}

// waitFor waits (on the wall clock, briefly) for cond.
func (b *bed) waitFor(what string, cond func() bool) {
	b.t.Helper()
	if !b.tryWaitFor(what, cond) {
		b.t.FailNow()
	}
}

// tryWaitFor is waitFor for other goroutines than the test's.
func (b *bed) tryWaitFor(what string, cond func() bool) bool {
	b.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		b.t.Errorf("at %s: waited in vain for %s", b.now(), what)
		return false
	}
	return true
}

// run is an elector's Run in progress, with what its lead and abort saw.
type run struct {
	e      *Elector
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	events  []string // "lead", "abort", "lead stopped", in order
	ledAt   time.Duration
	abortAt time.Duration
	cause   error // leadCtx's cause when it ended
	// drain runs in lead after its context ended, before it returns.
	drain func()
}

func (b *bed) run(e *Elector) *run {
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{e: e, cancel: cancel, done: make(chan error, 1)}
	b.t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			b.t.Errorf("%s: Run did not return after its context ended", e.Identity())
		}
	})
	note := func(ev string, at *time.Duration) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, ev)
		if at != nil {
			*at = b.now()
		}
	}
	lead := func(ctx context.Context) error {
		note("lead", &r.ledAt)
		<-ctx.Done()
		r.mu.Lock()
		r.cause = context.Cause(ctx)
		drain := r.drain
		r.mu.Unlock()
		if drain != nil {
			drain()
		}
		note("lead stopped", nil)
		return nil
	}
	go func() { r.done <- e.Run(ctx, lead, func() { note("abort", &r.abortAt) }) }()
	return r
}

func (r *run) has(ev string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.events, ev)
}

func (r *run) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// result waits for Run to return.
func (r *run) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// leading starts e, waits until it leads and its renewal timer waits, and returns its run.
func (b *bed) leading(e *Elector, timers int) *run {
	b.t.Helper()
	r := b.run(e)
	b.waitFor(e.Identity()+" leading", func() bool { return r.has("lead") && b.clk.Waiters() == timers })
	return r
}

func TestLeaderWhoseRenewalsFailStopsExactlyAtRenewDeadlinePlusRetryPeriod(t *testing.T) {
	b := newBed(t)
	a := b.leading(b.elector("a"), 1)
	b.setFailWrites("a", errors.New("apiserver unreachable"))
	limit := DefaultRenewDeadline + DefaultRetryPeriod // 12s after the last renewal (at 0s)

	for b.now() < limit-DefaultRetryPeriod {
		b.step(DefaultRetryPeriod, 1)
		if !a.e.IsLeader() || a.has("abort") {
			t.Fatalf("at %s, before the deadline: got stopped (%v), want still leading", b.now(), a.log())
		}
	}
	b.step(DefaultRetryPeriod-time.Millisecond, 1)
	if !a.e.IsLeader() || a.has("abort") {
		t.Fatalf("at %s, 1ms before the deadline: got stopped, want still leading", b.now())
	}
	// Each try is an update of the record last written, then a read and an update.
	if got, want := b.writesBy("a"), 1+2*5; got != want {
		t.Errorf("writes: got %d, want %d (the acquisition, then a failed try every retry period)", got, want)
	}
	b.clk.Step(time.Millisecond)
	err := a.result(t)
	if !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrFenced) {
		t.Fatalf("Run: got %v, want ErrLeaseLost", err)
	}
	if a.abortAt != limit {
		t.Errorf("abort at %s, want at %s (RenewDeadline + RetryPeriod after the last renewal)", a.abortAt, limit)
	}
	if got, want := a.log(), []string{"lead", "abort", "lead stopped"}; !slices.Equal(got, want) {
		t.Errorf("events: got %v, want %v (abort before lead's context ends)", got, want)
	}
	if !errors.Is(a.cause, ErrLeaseLost) {
		t.Errorf("lead's context cause: got %v, want ErrLeaseLost", a.cause)
	}
	if a.e.IsLeader() {
		t.Error("still reports leading after losing the lease")
	}
	if h := holderOf(b.lease()); h != "a" {
		t.Errorf("lease holder after a loss: got %q, want %q (a lost lease is left alone)", h, "a")
	}
}

func TestLeaderWhoseRenewalsSucceedKeepsLeading(t *testing.T) {
	b := newBed(t)
	a := b.leading(b.elector("a"), 1)
	for range 3 * (DefaultLeaseDuration / DefaultRetryPeriod) {
		b.step(DefaultRetryPeriod, 1)
	}
	if !a.e.IsLeader() || a.has("abort") {
		t.Fatalf("at %s: got stopped (%v), want leading", b.now(), a.log())
	}
	l := b.lease()
	if got := l.Spec.RenewTime.Time; !got.Equal(b.clk.Now()) {
		t.Errorf("renew time: got %s, want %s", got.Sub(b.t0), b.now())
	}
	if got := l.Spec.AcquireTime.Time; !got.Equal(b.t0) {
		t.Errorf("acquire time: got %s, want 0s (kept across renewals)", got.Sub(b.t0))
	}
}

func TestFencedLeaderStopsAtOnceAndHandsTheLeaseOn(t *testing.T) {
	b := newBed(t)
	standby := b.elector("b")
	if standby.Fence(errors.New("foreign write")) {
		t.Error("Fence on an elector that never led: got true, want false")
	}
	a := b.leading(b.elector("a"), 1)
	cause := errors.New("checkpoint written by another relay")
	if !a.e.Fence(cause) {
		t.Fatal("Fence while leading: got false, want true")
	}
	err := a.result(t)
	var fenced *FencedError
	if !errors.Is(err, ErrFenced) || !errors.Is(err, cause) || !errors.As(err, &fenced) || errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Run: got %v, want a *FencedError wrapping the cause", err)
	}
	if err.Error() != cause.Error() {
		t.Errorf("message: got %q, want the cause's %q", err, cause)
	}
	if a.abortAt != 0 {
		t.Errorf("abort at %s, want at once (0s)", a.abortAt)
	}
	if got, want := a.log(), []string{"lead", "abort", "lead stopped"}; !slices.Equal(got, want) {
		t.Errorf("events: got %v, want %v", got, want)
	}
	if !errors.Is(a.cause, ErrFenced) {
		t.Errorf("lead's context cause: got %v, want ErrFenced", a.cause)
	}
	l := b.lease()
	if h := holderOf(l); h != "" || *l.Spec.LeaseDurationSeconds != 1 {
		t.Errorf("lease after fencing: holder %q, duration %ds; want released (no holder, 1s)", h, *l.Spec.LeaseDurationSeconds)
	}
	if a.e.Fence(cause) {
		t.Error("Fence after the run ended: got true, want false")
	}
}

func TestStandbyTakesOverOnlyAfterTheLeaseExpiresAndTheOldLeaderStopped(t *testing.T) {
	b := newBed(t)
	a := b.leading(b.elector("a"), 1)
	sb := b.run(b.elector("b"))
	b.waitFor("the standby to read the lease", func() bool { return b.clk.Waiters() == 2 })
	if got, want := sb.e.Role(), "standby b (leader a)"; got != want {
		t.Errorf("standby role: got %q, want %q", got, want)
	}
	// a's last renewal was its acquisition at 0s: from now on it cannot renew.
	b.setFailWrites("a", errors.New("partitioned"))
	for b.now() < DefaultLeaseDuration-DefaultRetryPeriod {
		timers := 2
		if b.now()+DefaultRetryPeriod >= DefaultRenewDeadline+DefaultRetryPeriod {
			timers = 1 // a stops
		}
		b.step(DefaultRetryPeriod, timers)
		if sb.has("lead") || sb.e.IsLeader() {
			t.Fatalf("at %s the standby leads, before the lease expired at %s", b.now(), DefaultLeaseDuration)
		}
	}
	b.step(DefaultRetryPeriod, 1) // past the lease duration: the standby's next try takes it
	b.waitFor("the standby to lead", func() bool { return sb.has("lead") })
	if err := a.result(t); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old leader's Run: got %v, want ErrLeaseLost", err)
	}
	t.Logf("old leader stopped at %s, standby led at %s", a.abortAt, sb.ledAt)
	if a.abortAt >= DefaultLeaseDuration {
		t.Errorf("old leader stopped at %s, want before the lease duration %s", a.abortAt, DefaultLeaseDuration)
	}
	if sb.ledAt < DefaultLeaseDuration || sb.ledAt > DefaultLeaseDuration+DefaultRetryPeriod {
		t.Errorf("standby led at %s, want at its first try after %s", sb.ledAt, DefaultLeaseDuration)
	}
	l := b.lease()
	if h, tr := holderOf(l), *l.Spec.LeaseTransitions; h != "b" || tr != 1 {
		t.Errorf("lease: holder %q, transitions %d; want b, 1", h, tr)
	}
	if got, want := sb.e.Role(), "leader b"; got != want {
		t.Errorf("new leader role: got %q, want %q", got, want)
	}
}

func TestGracefulStopRenewsWhileLeadDrainsThenReleases(t *testing.T) {
	b := newBed(t)
	e := b.elector("a")
	drained := make(chan struct{})
	r := b.run(e)
	r.mu.Lock()
	r.drain = func() {
		// Draining takes three retry periods: the lease must stay renewed meanwhile.
		before := b.writesBy("a")
		for range 3 {
			if !b.tryStep(DefaultRetryPeriod, 1) {
				break
			}
		}
		if got := b.writesBy("a") - before; got != 3 {
			t.Errorf("renewals while draining: got %d, want 3", got)
		}
		if h := holderOf(b.lease()); h != "a" {
			t.Errorf("lease holder while draining: got %q, want a", h)
		}
		close(drained)
	}
	r.mu.Unlock()
	b.waitFor("a leading", func() bool { return r.has("lead") && b.clk.Waiters() == 1 })
	r.cancel()
	if err := r.result(t); err != nil {
		t.Fatalf("Run after a graceful stop: got %v, want nil", err)
	}
	<-drained
	if r.has("abort") {
		t.Error("a graceful stop called abort")
	}
	l := b.lease()
	if h := holderOf(l); h != "" || *l.Spec.LeaseDurationSeconds != 1 || *l.Spec.LeaseTransitions != 0 {
		t.Errorf("lease after a graceful stop: holder %q, duration %ds, transitions %d; want released, 1s, 0",
			h, *l.Spec.LeaseDurationSeconds, *l.Spec.LeaseTransitions)
	}
}

func TestReleaseClearsOnlyOurOwnLease(t *testing.T) {
	b := newBed(t)
	other := "someone-else"
	dur, tr := int32(15), int32(3)
	if _, err := b.cs.CoordinationV1().Leases(testNamespace).Create(context.Background(), &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: testLease, Namespace: testNamespace},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &dur, LeaseTransitions: &tr},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := b.elector("me")
	e.release(context.Background())
	if h := holderOf(b.lease()); h != other {
		t.Fatalf("released another's lease: holder %q", h)
	}
	l := b.lease()
	me := "me"
	l.Spec.HolderIdentity = &me
	if _, err := b.cs.CoordinationV1().Leases(testNamespace).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.release(context.Background())
	l = b.lease()
	if h := holderOf(l); h != "" || *l.Spec.LeaseDurationSeconds != 1 || *l.Spec.LeaseTransitions != 3 {
		t.Errorf("after release: holder %q, duration %d, transitions %d; want no holder, 1s, transitions kept",
			h, *l.Spec.LeaseDurationSeconds, *l.Spec.LeaseTransitions)
	}
}

func TestReadinessAndHealthInEachState(t *testing.T) {
	b := newBed(t)
	sb := b.elector("b")
	check := func(state string, e *Elector, role string, notReady, wedged string) {
		t.Helper()
		if got := e.Role(); got != role {
			t.Errorf("%s: role: got %q, want %q", state, got, role)
		}
		if got := strings.Join(e.StandbyNotReady(), "; "); !contains(got, notReady) {
			t.Errorf("%s: not ready: got %q, want %q", state, got, notReady)
		}
		if got := strings.Join(e.Wedged(), "; "); !contains(got, wedged) {
			t.Errorf("%s: wedged: got %q, want %q", state, got, wedged)
		}
	}
	check("standby before reading the lease", sb, "standby b (no leader known)", "lease: not read yet", "")

	a := b.leading(b.elector("a"), 1)
	check("leader", a.e, "leader a", "", "")
	b.run(sb)
	b.waitFor("the standby to read the lease", func() bool { return b.clk.Waiters() == 2 })
	check("standby that read the lease", sb, "standby b (leader a)", "", "")

	// The apiserver goes out of reach of both: the standby stays ready for 5 retry periods
	// after its last read, the leader stops at 12s, and is wedged 20s after its lease
	// duration if it still runs.
	b.setFailReads(errors.New("connection refused"))
	b.setFailWrites("a", errors.New("connection refused"))
	b.setFailWrites("b", errors.New("connection refused"))
	for range 5 {
		timers := 2
		if b.now()+DefaultRetryPeriod >= DefaultRenewDeadline+DefaultRetryPeriod {
			timers = 1
		}
		b.step(DefaultRetryPeriod, timers)
	}
	check("standby 5 retry periods after its last read", sb, "standby b (leader a)", "", "")
	b.step(time.Millisecond, 2)
	check("standby just over 5 retry periods after its last read", sb, "standby b (leader a)",
		"lease: not read for 10s, cannot campaign: connection refused", "")

	b.step(DefaultRetryPeriod-time.Millisecond, 1)
	if err := a.result(t); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("leader cut off: Run got %v, want ErrLeaseLost", err)
	}
	check("leader that lost its lease", a.e, "standby a (leader a)", "lease: not read for 12s", "")
	b.clk.SetTime(b.t0.Add(DefaultLeaseDuration + 20*time.Second)) // kube-controller-manager's tolerance
	check("lost leader still running at lease duration + 20s", a.e, "standby a (leader a)", "lease: not read", "")
	b.clk.Step(time.Millisecond)
	check("lost leader still running past lease duration + 20s", a.e, "standby a (leader a)", "lease: not read",
		"failed election to renew leadership on lease relay")
}

// contains reports whether got contains want, and is empty when want is.
func contains(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.Contains(got, want)
}

func TestRunBeforeLeadingEndsCleanlyWithCtx(t *testing.T) {
	b := newBed(t)
	_ = b.leading(b.elector("a"), 1)
	sb := b.run(b.elector("b"))
	b.waitFor("the standby to wait", func() bool { return b.clk.Waiters() == 2 })
	sb.cancel()
	if err := sb.result(t); err != nil {
		t.Fatalf("standby's Run when ctx ends: got %v, want nil", err)
	}
	if sb.has("lead") || sb.has("abort") {
		t.Errorf("standby events: got %v, want none", sb.log())
	}
	if h := holderOf(b.lease()); h != "a" {
		t.Errorf("lease holder: got %q, want a", h)
	}
}

// TestRunBeforeLeadingReleasesALeaseItsLostWriteTook: a try whose write the apiserver
// applied but whose answer was lost leaves the lease naming a process that does not lead;
// stopped then, it gives the lease up, so that a standby need not wait for it to expire.
func TestRunBeforeLeadingReleasesALeaseItsLostWriteTook(t *testing.T) {
	b := newBed(t)
	b.cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction)
		if err := b.cs.Tracker().Create(c.GetResource(), c.GetObject(), c.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewTimeoutError("applied, but the answer was lost", 1)
	})
	sb := b.run(b.elector("b"))
	b.waitFor("the failed try to wait for the next", func() bool { return b.clk.Waiters() == 1 })
	if h := holderOf(b.lease()); h != "b" {
		t.Fatalf("lease holder after the lost write: got %q, want b", h)
	}
	sb.cancel()
	if err := sb.result(t); err != nil {
		t.Fatalf("Run when ctx ends: got %v, want nil", err)
	}
	if sb.has("lead") {
		t.Errorf("events: got %v, want no lead", sb.log())
	}
	l := b.lease()
	if h, d := holderOf(l), *l.Spec.LeaseDurationSeconds; h != "" || d != 1 {
		t.Errorf("lease after Run: holder %q, duration %ds; want released (no holder, 1s)", h, d)
	}
}

func TestLeaderThatFindsTheLeaseTakenStopsAtItsNextRenewal(t *testing.T) {
	b := newBed(t)
	a := b.leading(b.elector("a"), 1)
	b.step(DefaultRetryPeriod, 1)
	// Another process writes itself into the Lease (an operator, or a standby whose clock
	// ran fast): a's next renewal conflicts, and it reads the new holder.
	l := b.lease()
	other := "x"
	l.Spec.HolderIdentity = &other
	if _, err := b.cs.CoordinationV1().Leases(testNamespace).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.setFailWrites("a", errors.New("conflict"))
	b.clk.Step(DefaultRetryPeriod)
	if err := a.result(t); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Run: got %v, want ErrLeaseLost", err)
	}
	if want := 2 * DefaultRetryPeriod; a.abortAt != want {
		t.Errorf("abort at %s, want at the next renewal (%s), not at the renew deadline", a.abortAt, want)
	}
	if h := holderOf(b.lease()); h != other {
		t.Errorf("lease holder: got %q, want %q left alone", h, other)
	}
}

func TestHardStopWinsOverLeadReturningBecauseOfAbort(t *testing.T) {
	// lead returns nil as soon as abort closes its connection, before its context ends, and
	// abort returns only once lead has: Run must still report the hard stop, not a clean end.
	for range 100 {
		b := newBed(t)
		e := b.elector("a")
		aborted, returning, led := make(chan struct{}), make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- e.Run(context.Background(), func(context.Context) error {
				close(led)
				<-aborted
				close(returning)
				return nil
			}, func() {
				close(aborted)
				<-returning
			})
		}()
		<-led
		if !e.Fence(errors.New("foreign write")) {
			t.Fatal("Fence while leading: got false")
		}
		if err := <-done; !errors.Is(err, ErrFenced) {
			t.Fatalf("Run: got %v, want ErrFenced", err)
		}
	}
}

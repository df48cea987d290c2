package leader

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// observedLock is a resource lock that remembers when the apiserver last answered it, and
// when the last successful write of the record was sent.
type observedLock struct {
	resourcelock.Interface
	clk clock.PassiveClock

	mu      sync.Mutex
	seen    time.Time
	written time.Time
	err     error
}

var _ resourcelock.Interface = (*observedLock)(nil)

func (o *observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := o.Interface.Get(ctx)
	o.note(err)
	return rec, raw, err
}

func (o *observedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := o.clk.Now()
	err := o.Interface.Create(ctx, ler)
	o.note(err)
	o.noteWrite(start, err)
	return err
}

func (o *observedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := o.clk.Now()
	err := o.Interface.Update(ctx, ler)
	o.note(err)
	o.noteWrite(start, err)
	return err
}

// noteWrite records when a successful write of the lease record was sent: no later than
// the time the apiserver recorded, so that deadlines counted from it are never late.
func (o *observedLock) noteWrite(start time.Time, err error) {
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.written = start
}

// note records a usable answer (success, a Lease not created yet, or a lost race for it),
// or else the error.
func (o *observedLock) note(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		o.seen = o.clk.Now()
		return
	}
	o.err = err
}

// lastWritten is when the last successful write of the record was sent.
func (o *observedLock) lastWritten() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written
}

// lastSeen is when the apiserver last gave a usable answer, zero before the first.
func (o *observedLock) lastSeen() (time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen, o.err
}

package main

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// observedLock is a resource lock that remembers when the apiserver last answered it.
type observedLock struct {
	resourcelock.Interface
	seen    atomic.Int64
	written atomic.Int64
	err     atomic.Pointer[error]
}

var _ resourcelock.Interface = (*observedLock)(nil)

func (o *observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := o.Interface.Get(ctx)
	o.note(err)
	return rec, raw, err
}

func (o *observedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := o.Interface.Create(ctx, ler)
	o.note(err)
	o.noteWrite(start, err)
	return err
}

func (o *observedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := o.Interface.Update(ctx, ler)
	o.note(err)
	o.noteWrite(start, err)
	return err
}

// noteWrite records when a successful write of the lease record was sent.
func (o *observedLock) noteWrite(start time.Time, err error) {
	if err == nil {
		o.written.Store(start.UnixNano())
	}
}

// lastWritten is when the last successful write of the record was sent.
func (o *observedLock) lastWritten() time.Time { return time.Unix(0, o.written.Load()) }

// note records a usable answer: success, a Lease not created yet, or a lost race for it.
func (o *observedLock) note(err error) {
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		o.seen.Store(time.Now().UnixNano())
		return
	}
	o.err.Store(&err)
}

func (o *observedLock) lastSeen() time.Time {
	n := o.seen.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (o *observedLock) lastErr() error {
	if e := o.err.Load(); e != nil {
		return *e
	}
	return nil
}

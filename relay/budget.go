package relay

import (
	"context"
	"sync"
)

// Budget bounds, in bytes, what the relay holds of objects between reading and acking them:
// the list pages being read, the changes waiting in intake buffers and the messages in
// flight. One Budget is shared by every source of a process, so that many resources listing
// at once share one bound instead of each having its own.
//
// Two kinds of holders take from it, and they wait differently so that no holder ever waits
// on what only it could release:
//   - a list page (reservePage) waits until it fits, or until nothing at all is held;
//   - a change handed to a pipeline (reserveChange) waits until it fits, or until no change
//     is held: a change is never kept waiting by pages alone, because the page it comes from
//     is released only after it is handed on.
//
// Either way a single holder larger than the whole budget passes once it is alone (it is
// charged the whole budget), so that no object is too large to relay. The bound is then
// exceeded by one object (a change admitted while pages are held), and by a page that turns
// out larger than it reserved (growPage). Waiters of each
// kind are served in arrival order, so a large one is not starved by a stream of small ones.
//
// A nil *Budget bounds nothing: every reservation succeeds at once.
type Budget struct {
	capacity int64

	mu sync.Mutex
	// used is everything held; changes is the part held by changes.
	used, changes int64
	// pageWaiters and changeWaiters wait in arrival order.
	pageWaiters, changeWaiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// NewBudget returns a budget of capacity bytes (at least 1).
func NewBudget(capacity int64) *Budget {
	return &Budget{capacity: max(capacity, 1)}
}

// Capacity returns the budget's size in bytes; 0 for a nil budget.
func (b *Budget) Capacity() int64 {
	if b == nil {
		return 0
	}
	return b.capacity
}

// Used returns the bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// charge is what a holder of n bytes is charged: n, but at most the whole budget.
func (b *Budget) charge(n int64) int64 {
	return min(max(n, 0), b.capacity)
}

// tryChange takes n bytes for a change without waiting and returns what it charged, or false
// when the change would have to wait.
func (b *Budget) tryChange(n int64) (int64, bool) {
	if b == nil {
		return 0, true
	}
	n = b.charge(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.changeWaiters) > 0 || !b.fitsChange(n) {
		return 0, false
	}
	b.used += n
	b.changes += n
	return n, true
}

// reserveChange takes n bytes for a change handed to a pipeline, waiting until they fit
// (see Budget), and returns what it charged; the pipeline gives it back with releaseChange
// when it retires the change. It fails only when ctx ends.
func (b *Budget) reserveChange(ctx context.Context, n int64) (int64, error) {
	if b == nil {
		return 0, nil
	}
	n = b.charge(n)
	b.mu.Lock()
	if len(b.changeWaiters) == 0 && b.fitsChange(n) {
		b.used += n
		b.changes += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.changeWaiters = append(b.changeWaiters, w)
	b.mu.Unlock()
	if err := b.wait(ctx, w, &b.changeWaiters, true); err != nil {
		return 0, err
	}
	return n, nil
}

// reservePage takes n bytes for a list page, waiting until they fit (see Budget), and returns
// what it charged. It fails only when ctx ends.
func (b *Budget) reservePage(ctx context.Context, n int64) (int64, error) {
	if b == nil {
		return 0, nil
	}
	n = b.charge(n)
	b.mu.Lock()
	if len(b.pageWaiters) == 0 && b.fitsPage(n) {
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.pageWaiters = append(b.pageWaiters, w)
	b.mu.Unlock()
	if err := b.wait(ctx, w, &b.pageWaiters, false); err != nil {
		return 0, err
	}
	return n, nil
}

// wait blocks until w is granted or ctx ends; on ctx's end it leaves the queue, or gives back
// a grant that raced with it.
func (b *Budget) wait(ctx context.Context, w *budgetWaiter, queue *[]*budgetWaiter, change bool) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted meanwhile: give it back.
		b.used -= w.n
		if change {
			b.changes -= w.n
		}
	default:
		for i, q := range *queue {
			if q == w {
				*queue = append((*queue)[:i], (*queue)[i+1:]...)
				break
			}
		}
	}
	b.grant()
	return ctx.Err()
}

// growPage adds n bytes to a page's charge without waiting: the page turned out larger than
// reserved. It returns what it charged.
func (b *Budget) growPage(n int64) int64 {
	if b == nil || n <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	return n
}

// releasePage gives back n bytes of a page's charge.
func (b *Budget) releasePage(n int64) {
	b.release(n, false)
}

// releaseChange gives back what reserveChange or tryChange charged.
func (b *Budget) releaseChange(n int64) {
	b.release(n, true)
}

func (b *Budget) release(n int64, change bool) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if change {
		b.changes -= n
	}
	b.grant()
}

func (b *Budget) fitsChange(n int64) bool { return b.used+n <= b.capacity || b.changes == 0 }

func (b *Budget) fitsPage(n int64) bool { return b.used+n <= b.capacity || b.used == 0 }

// grant admits the waiters at the head of each queue that fit now; called with mu held.
// Changes go first: they free pages, which free everything else.
func (b *Budget) grant() {
	for len(b.changeWaiters) > 0 && b.fitsChange(b.changeWaiters[0].n) {
		w := b.changeWaiters[0]
		b.changeWaiters = b.changeWaiters[1:]
		b.used += w.n
		b.changes += w.n
		close(w.ready)
	}
	for len(b.pageWaiters) > 0 && b.fitsPage(b.pageWaiters[0].n) {
		w := b.pageWaiters[0]
		b.pageWaiters = b.pageWaiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

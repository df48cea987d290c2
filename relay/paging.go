package relay

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// pageShareDivisor sets how much of the budget one list page may take: an eighth, so that
	// the page being handed on and the one fetched ahead hold at most a quarter of it, and the
	// changes made of them have the rest.
	pageShareDivisor = 8
	// assumedObjectBytes is the object size assumed before a list has seen any: about the
	// largest object etcd stores (its default request limit is 1.5 MiB), so that the first
	// page fits its share whatever the resource holds.
	assumedObjectBytes = 3 << 19
	// itemOverhead is what a change costs besides its messages' bytes: the item, the
	// messages' structs and header maps, the publish future.
	itemOverhead = 512
)

// budgeted is implemented by readers whose lists take from a budget.
type budgeted interface {
	listBudget() *Budget
}

// budgetOf returns the budget client's list pages take from, nil when none.
func budgetOf(client reader) *Budget {
	if b, ok := client.(budgeted); ok {
		return b.listBudget()
	}
	return nil
}

// pager chooses the size of each list request from the budget and the bytes per object seen
// so far: pages of large objects (Helm release Secrets near 1 MiB) get few objects, pages of
// small ones the apiserver's usual listPageSize. Without a budget every page asks for
// listPageSize objects.
type pager struct {
	budget *Budget
	// limit is the number of objects the next request asks for.
	limit int64
	// perObject is the bytes per object of the last page (assumedObjectBytes before any).
	perObject int64
}

func newPager(b *Budget) *pager {
	p := &pager{budget: b, limit: listPageSize, perObject: assumedObjectBytes}
	if b != nil {
		p.limit = p.fit()
	}
	return p
}

// share is the bytes one page may hold.
func (p *pager) share() int64 {
	return max(p.budget.Capacity()/pageShareDivisor, 1)
}

// fit is the number of objects of perObject bytes that fill a page's share: at least one, at
// most listPageSize.
func (p *pager) fit() int64 {
	return min(max(p.share()/p.perObject, 1), listPageSize)
}

// estimate is the bytes the next page is expected to hold, reserved before it is requested.
func (p *pager) estimate() int64 {
	if p.budget == nil {
		return 0
	}
	return p.limit * p.perObject
}

// observe adapts the next page's size to a page of items objects in bytes: it shrinks at
// once when objects are larger than assumed, and grows back at most twofold per page when
// they are smaller, so that large objects after a run of small ones overshoot by at most one
// page. A page without items or of unknown size changes nothing.
func (p *pager) observe(bytes int64, items int) {
	if p.budget == nil || bytes <= 0 || items == 0 {
		return
	}
	p.perObject = max((bytes+int64(items)-1)/int64(items), 1)
	p.limit = min(p.fit(), 2*p.limit)
}

// chargePage adjusts a page's charge from the reserved estimate to the bytes it holds and
// returns the new charge.
func chargePage(b *Budget, reserved, bytes int64) int64 {
	switch {
	case bytes <= 0:
		return reserved
	case bytes > reserved:
		return reserved + b.growPage(bytes-reserved)
	default:
		b.releasePage(reserved - bytes)
		return bytes
	}
}

// size is what an item holds in memory: its messages and an overhead per change; 0 for a
// mark.
func (it *item) size() int64 {
	var n int64
	for _, m := range [...]*nats.Msg{it.mirror, it.msg, it.index} {
		if m != nil {
			n += int64(len(m.Subject) + len(m.Data) + event.HeaderSize(m.Header))
		}
	}
	if n == 0 {
		return 0
	}
	return n + itemOverhead
}

// release gives the item's charge back to b; once only.
func (it *item) release(b *Budget) {
	if it == nil || it.charged == 0 {
		return
	}
	b.releaseChange(it.charged)
	it.charged = 0
}

// reserve charges it to the source's budget before intake hands it on, waiting while the
// budget is exhausted: the watch is not read meanwhile, the same back-pressure as a full
// buffer, and after watchStallLimit the open watch is released (see send).
func (in *intake) reserve(ctx context.Context, it *item) error {
	b := in.src.budget
	n := it.size()
	if b == nil || n == 0 {
		return nil
	}
	if c, ok := b.tryChange(n); ok {
		it.charged = c
		return nil
	}
	if in.release != nil {
		stallCtx, cancel := context.WithTimeout(ctx, watchStallLimit)
		c, err := b.reserveChange(stallCtx, n)
		cancel()
		if err == nil {
			it.charged = c
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		in.log.Warn().Stringer("stalled", watchStallLimit).Int64("budget_bytes", b.Capacity()).
			Msg("memory budget held by changes not yet published: watch released until they are")
		in.release()
		in.release = nil
	}
	c, err := b.reserveChange(ctx, n)
	if err != nil {
		return err
	}
	it.charged = c
	return nil
}

// releaseBuffered gives back the charges of the items left in the buffer once intake and
// the pipeline have both stopped.
func (p *pipeline) releaseBuffered() {
	for {
		select {
		case it := <-p.in:
			it.release(p.budget)
		default:
			return
		}
	}
}

// handPage calls fn for each object of p, giving back the page's charge object by object as
// each is handed on (the change it became holds its own), and dropping the page's reference
// to it so that it can be collected.
func handPage(p *page, charged int64, b *Budget, fn func(object) error) error {
	defer func() { b.releasePage(charged) }() // what is left: all of it on an error or an empty page
	n := int64(len(p.Items))
	for i := range p.Items {
		share := charged / (n - int64(i))
		err := fn(p.Items[i])
		p.Items[i] = object{}
		b.releasePage(share)
		charged -= share
		if err != nil {
			return err
		}
	}
	return nil
}

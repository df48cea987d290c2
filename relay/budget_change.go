package relay

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// itemOverhead is what a change costs besides its messages' bytes: the item, the
// messages' structs and header maps, the publish future.
const itemOverhead = 512

// size is what an item holds in memory: its messages and an overhead per change; 0 for a
// mark.
func (it *item) size() int64 {
	var n int64
	add := func(m *nats.Msg) {
		if m != nil {
			n += int64(len(m.Subject) + len(m.Data) + event.HeaderSize(m.Header))
		}
	}
	add(it.mirror)
	add(it.msg)
	for _, m := range it.derived {
		add(m)
	}
	add(it.index)
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

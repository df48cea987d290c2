package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// retryBackoffMin and retryBackoffMax bound the wait before a failed publish is tried
	// again: short enough to follow a NATS server restart within a second, long enough not to
	// spin while NATS is down for minutes.
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 5 * time.Second
)

// Publisher sends a message to JetStream asynchronously; jetstream.JetStream satisfies it.
type Publisher interface {
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

var _ Publisher = (jetstream.JetStream)(nil)

// item is one step of a source's stream: a change to publish, or a mark that lets the
// checkpoint advance once everything before it is acked.
type item struct {
	seq uint64
	// key is namespace/name: changes of one key are published one at a time, in order.
	key string
	// msg is the event; nil for a mark.
	msg *nats.Msg
	// mirror, when set, writes the object's state to the state mirror; it is published and
	// acked before msg, so that the mirror is never behind the stream (see docs/guarantees.md).
	mirror *nats.Msg
	// index, when set, records the change in the durable object index; it is published after
	// msg is acked. The item is done only when every step is acked.
	index *nats.Msg
	// step counts the steps (mirror, msg, index) acked so far.
	step int
	// rv is the resourceVersion the checkpoint may move to once this item and every earlier
	// one are done; empty for items that do not move it (objects of a list, whose
	// resourceVersions are not in order).
	rv string
	// urgent asks for the checkpoint to be written now rather than at the next interval
	// (bookmarks, the end of a list).
	urgent bool

	attempts int
	done     bool
	onAck    func(ack *jetstream.PubAck)
	// received is when intake handed the item on (the change's receipt); sent is when the
	// current step was last handed to the client. Both feed the observer.
	received, sent time.Time
	// charged is what the item holds of the memory budget (see Budget).
	charged int64
}

// current returns the message of the step in progress: mirror, event, index (skipping the
// ones not set), or nil when every step is done.
func (it *item) current() *nats.Msg {
	n := it.step
	for _, m := range [...]*nats.Msg{it.mirror, it.msg, it.index} {
		if m == nil {
			continue
		}
		if n == 0 {
			return m
		}
		n--
	}
	return nil
}

type result struct {
	it  *item
	ack *jetstream.PubAck
	err error
}

// objectQueue holds the changes of one object waiting behind the one in flight.
type objectQueue struct {
	busy    bool
	waiting []*item
}

// pipeline publishes a source's items asynchronously with a bounded number outstanding,
// keeps the changes of each object in order (one in flight per object, retried until acked),
// and reports the resourceVersion up to which everything is acked.
type pipeline struct {
	pub Publisher
	// in is the bounded buffer between watch intake and publishing.
	in chan *item
	// maxOutstanding bounds items taken from in and not yet acked.
	maxOutstanding int
	// advance is called with the checkpoint resourceVersion whenever it moves.
	advance func(rv string, urgent bool)
	// onRetry is called for every failed publish attempt before its retry (for logging).
	onRetry func(it *item, err error)
	// obs, when set, is told about acks, failures and retries.
	obs Observer
	// budget gets back each item's charge when the item is retired (or given up at exit).
	budget *Budget

	// progress is when the run loop last did something (took an item, got an ack or an
	// error, sent a retry), in Unix nanoseconds; held is how many items it holds; exited is
	// set once run returned. They tell a wedged pipeline from an idle one (see stalled).
	progress atomic.Int64
	held     atomic.Int64
	exited   atomic.Bool

	// failMu guards failSince and failErr: when publishing started failing without a
	// success since, and the last error; read by status checks.
	failMu    sync.Mutex
	failSince time.Time
	failErr   error
}

// failing returns since when publishes have been failing without a success, and the last
// error; a nil error means the last publish succeeded.
func (p *pipeline) failing() (time.Time, error) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	return p.failSince, p.failErr
}

func (p *pipeline) noteResult(err error) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	if err == nil {
		p.failSince, p.failErr = time.Time{}, nil
		return
	}
	if p.failErr == nil {
		p.failSince = time.Now()
	}
	p.failErr = err
}

func newPipeline(pub Publisher, buffer, maxOutstanding int, advance func(string, bool), onRetry func(*item, error)) *pipeline {
	p := &pipeline{
		pub:            pub,
		in:             make(chan *item, buffer),
		maxOutstanding: maxOutstanding,
		advance:        advance,
		onRetry:        onRetry,
	}
	p.progress.Store(time.Now().UnixNano())
	return p
}

// stalled reports how long the pipeline has held work (items buffered or taken) without
// doing anything with it, and whether that is longer than limit. A pipeline that is idle
// (nothing to do) or has stopped is never stalled.
func (p *pipeline) stalled(limit time.Duration) (time.Duration, bool) {
	if p.exited.Load() || (len(p.in) == 0 && p.held.Load() == 0) {
		return 0, false
	}
	idle := time.Since(time.Unix(0, p.progress.Load()))
	return idle, idle > limit
}

// run publishes until in is closed and everything taken is acked (returns nil), or until
// stop is closed: then it takes nothing new, sends nothing queued, waits for the publishes in
// flight until ctx ends, and returns. Everything acked has been reported through advance.
func (p *pipeline) run(ctx context.Context, stop <-chan struct{}) error {
	var (
		seq      uint64
		pending  []*item // taken and not yet retired, in seq order
		objects  = make(map[string]*objectQueue)
		inflight int
		results  = make(chan result, p.maxOutstanding)
		retries  = make(chan *item, p.maxOutstanding)
		in       = p.in
		stopping bool
		// backingOff holds items waiting for their retry timer; on stop they are given up
		// at once instead of holding the shutdown until their timers fire.
		backingOff = make(map[*item]bool)
	)
	defer p.exited.Store(true)
	defer func() {
		for _, it := range pending {
			it.release(p.budget)
		}
	}()
	send := func(it *item) {
		inflight++
		it.sent = time.Now()
		fut, err := p.pub.PublishMsgAsync(it.current())
		if err != nil {
			results <- result{it: it, err: err}
			return
		}
		go func() {
			select {
			case ack := <-fut.Ok():
				results <- result{it: it, ack: ack}
			case err := <-fut.Err():
				results <- result{it: it, err: err}
			}
		}()
	}
	retire := func() {
		last, urgent := "", false
		n := 0
		for ; n < len(pending) && pending[n].done; n++ {
			pending[n].release(p.budget)
			if pending[n].rv != "" {
				last = pending[n].rv
				urgent = urgent || pending[n].urgent
			}
		}
		if n == 0 {
			return
		}
		clear(pending[:n])
		pending = pending[n:]
		if last != "" {
			p.advance(last, urgent)
		}
	}
	for {
		p.held.Store(int64(len(pending)))
		p.progress.Store(time.Now().UnixNano())
		if stopping || (in == nil && len(pending) == 0) {
			if inflight == 0 {
				retire()
				return nil
			}
		}
		take := in
		if stopping || len(pending) >= p.maxOutstanding {
			take = nil
		}
		var stopC <-chan struct{}
		if !stopping {
			stopC = stop
		}
		select {
		case it, ok := <-take:
			if !ok {
				in = nil
				continue
			}
			seq++
			it.seq = seq
			pending = append(pending, it)
			if it.current() == nil { // a mark
				it.done = true
				retire()
				continue
			}
			q := objects[it.key]
			if q == nil {
				q = &objectQueue{}
				objects[it.key] = q
			}
			if q.busy {
				q.waiting = append(q.waiting, it)
				continue
			}
			q.busy = true
			send(it)

		case r := <-results:
			p.noteResult(r.err)
			if r.err != nil {
				p.note(NotePublishFailed)
				if stopping {
					inflight--
					continue
				}
				r.it.attempts++
				if errors.Is(r.err, nats.ErrMaxPayload) && r.it.current() == r.it.msg && len(r.it.msg.Data) > 0 {
					// The server's limit is lower than when the message was built (another
					// node, a changed max_payload): send the reference without body.
					r.it.msg.Data = nil
					r.it.msg.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
				}
				if p.onRetry != nil {
					p.onRetry(r.it, r.err)
				}
				it := r.it
				backingOff[it] = true
				time.AfterFunc(backoff(it.attempts), func() { retries <- it })
				continue
			}
			inflight--
			if r.it.current() == r.it.msg {
				p.observe(r.it, r.ack, r.it.sent)
				if r.it.onAck != nil {
					r.it.onAck(r.ack)
				}
			}
			r.it.step++
			r.it.attempts = 0
			if r.it.current() != nil {
				send(r.it)
				continue
			}
			r.it.done = true
			q := objects[r.it.key]
			if len(q.waiting) > 0 && !stopping {
				next := q.waiting[0]
				q.waiting = q.waiting[1:]
				send(next)
			} else {
				delete(objects, r.it.key)
			}
			retire()

		case it := <-retries:
			if !backingOff[it] {
				continue // given up at stop
			}
			delete(backingOff, it)
			inflight--
			if stopping {
				continue
			}
			p.note(NotePublishRetried)
			send(it)

		case <-stopC:
			stopping = true
			inflight -= len(backingOff)
			clear(backingOff)

		case <-ctx.Done():
			retire()
			return ctx.Err()
		}
	}
}

// backoff returns the wait before attempt n+1: doubling from retryBackoffMin, capped.
func backoff(attempts int) time.Duration {
	d := retryBackoffMin
	for i := 1; i < attempts && d < retryBackoffMax; i++ {
		d *= 2
	}
	return min(d, retryBackoffMax)
}

package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// retryBackoffMin and retryBackoffMax bound the wait before a failed publish is tried
	// again: short enough to follow a NATS server restart within a second, long enough not to
	// spin while NATS is down for minutes.
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 5 * time.Second

	// maxControlLine is nats-server's default max_control_line: the server closes the
	// connection of a client whose PUB/HPUB arguments (subject, reply, sizes) are longer. The
	// client cannot learn the configured value, so the relay holds to the default.
	maxControlLine = 4096
	// asyncReplyMax bounds the reply subject of an asynchronous publish by a publisher that
	// does not tell its own bound (replyBounded): nats.go's "_INBOX." replies fit it, with
	// room for a short custom inbox prefix. AckPublisher tells its own.
	asyncReplyMax = 64
	// maxSizeDigits is the most digits a size on the control line has (an int64).
	maxSizeDigits = 19
)

// Publisher sends a message to JetStream asynchronously; jetstream.JetStream satisfies it.
type Publisher interface {
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

var _ Publisher = (jetstream.JetStream)(nil)

// replyBounded is a Publisher that knows the longest reply subject it gives a publish, which
// grows with the connection's inbox prefix. AckPublisher is one.
type replyBounded interface {
	MaxReplyLen() int
}

// replyMaxOf returns the longest reply subject pub gives a publish: its own bound when it
// tells one, else asyncReplyMax.
func replyMaxOf(pub Publisher) int {
	if b, ok := pub.(replyBounded); ok {
		return b.MaxReplyLen()
	}
	return asyncReplyMax
}

// fitsControlLine reports whether msg's HPUB arguments (subject, a JetStream reply of up to
// replyMax bytes, header and total sizes) stay within the server's control line limit. It
// runs for every step of every change, so a subject short enough that the arguments fit
// whatever the sizes (at most maxSizeDigits each) passes without measuring the headers.
func fitsControlLine(msg *nats.Msg, replyMax int) bool {
	if len(msg.Subject) <= maxControlLine-replyMax-3-2*maxSizeDigits {
		return true
	}
	hdr := 0
	if len(msg.Header) > 0 {
		hdr = event.HeaderSize(msg.Header)
	}
	n := len(msg.Subject) + 1 + replyMax + 1 + len(strconv.Itoa(hdr)) + 1 + len(strconv.Itoa(hdr+len(msg.Data)))
	return n <= maxControlLine
}

// omitBody turns the event msg into its reference: same subject and headers, no body, and
// the reason in the body-omitted header.
func omitBody(msg *nats.Msg, reason string) {
	msg.Data = nil
	msg.Header.Del(event.HeaderPayload)
	msg.Header.Del(event.HeaderRedacted)
	msg.Header.Del(event.HeaderCEDataSchema)
	msg.Header.Set(event.HeaderBodyOmitted, reason)
}

type result struct {
	it  *item
	ack *jetstream.PubAck
	err error
	// f is the publish a denial ended (ErrPublishDenied); nil otherwise.
	f *flight
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
	// replyMax is the longest reply subject pub gives a publish (see fitsControlLine).
	replyMax int
	// in is the bounded buffer between watch intake and publishing.
	in chan *item
	// maxOutstanding bounds items taken from in and not yet acked.
	maxOutstanding int
	// advance is called with the checkpoint resourceVersion whenever it moves.
	advance func(rv string, urgent bool)
	// onRetry is called for every failed publish attempt before its retry (for logging).
	onRetry func(it *item, err error)
	// onRefused, when set, is called for a step NATS refused for good (see Refusal), before
	// the pipeline moves on: reference is set when the step is sent again reduced (the
	// event without its body, the mirror record as the object's identity); otherwise the
	// step is given up (undeliverable).
	onRefused func(it *item, step Step, why Refusal, err error, reference bool)
	// denials, when set, fails a publish the server refused with a permissions violation
	// at once, instead of when its ack times out.
	denials *Denials
	// obs, when set, is told about acks, failures and retries.
	obs Observer
	// budget gets back each item's charge when the item is retired (or given up at exit).
	budget *Budget
	// journal, when set, takes the index records (the index step) instead of pub: it writes
	// the records of many objects as one message.
	journal IndexJournal
	// clock times progress, failures and retry backoffs (tests step a fake one).
	clock clock.WithDelayedExecution

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
		p.failSince = p.clock.Now()
	}
	p.failErr = err
}

func newPipeline(pub Publisher, buffer, maxOutstanding int, clk clock.WithDelayedExecution, advance func(string, bool), onRetry func(*item, error)) *pipeline {
	p := &pipeline{
		pub:            pub,
		replyMax:       replyMaxOf(pub),
		in:             make(chan *item, buffer),
		maxOutstanding: maxOutstanding,
		advance:        advance,
		onRetry:        onRetry,
		clock:          clk,
	}
	p.progress.Store(p.clock.Now().UnixNano())
	return p
}

// stalled reports how long the pipeline has held work (items buffered or taken) without
// doing anything with it, and whether that is longer than limit. A pipeline that is idle
// (nothing to do) or has stopped is never stalled.
func (p *pipeline) stalled(limit time.Duration) (time.Duration, bool) {
	if p.exited.Load() || (len(p.in) == 0 && p.held.Load() == 0) {
		return 0, false
	}
	idle := p.clock.Since(time.Unix(0, p.progress.Load()))
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
		// orphaned counts denied publishes the publisher still holds: the server sends no
		// reply to a denied publish, so the publisher keeps it pending until its ack times
		// out. They count toward maxOutstanding, so that a denied namespace cannot pile up
		// publishes waiting for nothing; released receives each one's item as it is let
		// go. A publisher of futures (jetstream.JetStream) holds the message meanwhile, so
		// its item's charge on the budget is kept (orphanCharges) until every orphan of the
		// item is let go (orphans). released has room for a window's worth: the publisher
		// lets orphans go from the goroutine that handles every source's acks, which must
		// not wait for this pipeline's loop.
		orphaned      int
		orphans       = make(map[*item]int)
		orphanCharges = make(map[*item]int64)
		released      = make(chan *item, p.maxOutstanding)
		exit          = make(chan struct{})
		pub           = ackedOf(p.pub)
	)
	defer close(exit)
	defer p.exited.Store(true)
	defer func() {
		for _, c := range orphanCharges {
			p.budget.releaseChange(c)
		}
	}()
	defer func() {
		for _, it := range pending {
			it.release(p.budget)
		}
	}()
	acks := &ackSink{results: results, released: released, exit: exit}
	send := func(it *item) {
		inflight++
		it.sent = p.clock.Now()
		msg := it.current()
		if p.journal != nil && it.currentStep() == StepIndex {
			p.journal.Write(msg, func(err error) { results <- result{it: it, err: err} })
			return
		}
		if !fitsControlLine(msg, p.replyMax) {
			// The server would close the connection: never send it.
			results <- result{it: it, err: fmt.Errorf("%w: %d bytes", errSubjectTooLong, len(msg.Subject))}
			return
		}
		f := &flight{it: it, sink: acks, denials: p.denials, subject: msg.Subject}
		p.denials.add(msg.Subject, f)
		if err := pub.PublishAcked(msg, f); err != nil {
			p.denials.remove(msg.Subject, f)
			// A denial may have reported the publish already: one result per publish. The
			// client holds no message of it either way.
			f.unsent = true
			if f.state.CompareAndSwap(flightWaiting, flightReported) {
				results <- result{it: it, err: err}
			}
		}
	}
	retire := func() {
		last, urgent := "", false
		n := 0
		for ; n < len(pending) && pending[n].done; n++ {
			pending[n].release(p.budget)
			if pending[n].retired != nil {
				// Whoever waits for it reads the checkpoint: report what it follows first.
				if last != "" {
					p.advance(last, urgent)
				}
				last, urgent = "", false
				close(pending[n].retired)
				continue
			}
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
	// finish marks it done, sends the next change of its object and retires what is done.
	finish := func(it *item) {
		it.done = true
		q := objects[it.key]
		if len(q.waiting) > 0 && !stopping {
			next := q.waiting[0]
			q.waiting = q.waiting[1:]
			send(next)
		} else {
			delete(objects, it.key)
		}
		retire()
	}
	for {
		p.held.Store(int64(len(pending)))
		p.progress.Store(p.clock.Now().UnixNano())
		if stopping || (in == nil && len(pending) == 0) {
			if inflight == 0 {
				retire()
				return nil
			}
		}
		take := in
		if stopping || len(pending)+orphaned >= p.maxOutstanding {
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

		case it := <-released:
			orphaned--
			if orphans[it]--; orphans[it] == 0 {
				p.budget.releaseChange(orphanCharges[it])
				delete(orphans, it)
				delete(orphanCharges, it)
			}

		case r := <-results:
			if errors.Is(r.err, ErrPublishDenied) && (r.f == nil || !r.f.unsent) {
				orphaned++
				orphans[r.it]++
				orphanCharges[r.it] += r.it.charged
				r.it.charged = 0
			}
			why := refusalOf(r.err)
			if why == "" {
				p.noteResult(r.err)
			}
			if r.err != nil {
				p.note(NotePublishFailed)
				if stopping {
					inflight--
					continue
				}
				if why != "" {
					inflight--
					if p.refused(r.it, why, r.err) {
						send(r.it)
					} else {
						finish(r.it)
					}
					continue
				}
				r.it.attempts++
				if p.onRetry != nil {
					p.onRetry(r.it, r.err)
				}
				it := r.it
				backingOff[it] = true
				p.clock.AfterFunc(publishRetry.delay(it.attempts), func() { retries <- it })
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
			finish(r.it)

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

// refused handles a step NATS refused for good and reports whether it has a step to send
// next. An event refused as too large goes out again as its reference (no body), a mirror
// record as the object's identity; any other refusal gives the step up as undeliverable.
// After a refused mirror record the event still goes out. After a refused event its derived
// events still go out but the index is not written (it records only what was published, so a
// relist after a restart offers the object again). A derived event is reduced to its
// reference like the event, or given up alone; a refused index record ends the item. Either
// way the item is done once nothing is left to send, and the changes of its object that wait
// behind it follow in order.
func (p *pipeline) refused(it *item, why Refusal, err error) bool {
	step := it.currentStep()
	if step == StepMirror && why == RefusedTooLarge && !it.mirrorReduced {
		if ref, ok := identityState(it.msg, it.key); ok {
			it.mirror.Data, it.mirrorReduced = ref, true
			if p.onRefused != nil {
				p.onRefused(it, step, why, err, true)
			}
			return true
		}
	}
	if msg := it.current(); (step == StepEvent || step == StepDerived) && why == RefusedTooLarge && len(msg.Data) > 0 {
		reason := event.BodyOmittedStreamLimit
		if errors.Is(err, nats.ErrMaxPayload) {
			// The server's limit is lower than when the message was built (another
			// node, a changed max_payload).
			reason = event.BodyOmittedOversize
		}
		omitBody(msg, reason)
		it.attempts = 0
		if p.onRefused != nil {
			p.onRefused(it, step, why, err, true)
		}
		return true
	}
	if p.onRefused != nil {
		p.onRefused(it, step, why, err, false)
	}
	p.undelivered(Undelivered{Step: step, Reason: why})
	it.attempts = 0
	switch step {
	case StepMirror, StepDerived:
		// A derived event given up does not hold back the others or the index record:
		// the record keeps the state conditions from firing again for this change.
		it.step++
		return it.current() != nil
	case StepEvent:
		// The derived events do not depend on the change's own event (as when it is
		// filtered): they still go out, each given up alone if refused too. The index
		// record does not: it records only changes whose event was published, and the
		// state conditions the derived events went out for (refusedIndex, when set).
		it.index = it.refusedIndex
		it.step++
		return it.current() != nil
	}
	return false
}

// identityState returns the state mirror's record of an object too large for its bucket:
// its identity read from the event's headers (apiVersion, kind, namespace, name, uid,
// resourceVersion), as the mirror keeps for an object over max_payload. The namespace and
// name come from key (namespace/name) when the headers hold them in the hashed form.
func identityState(msg *nats.Msg, key string) ([]byte, bool) {
	if msg == nil {
		return nil, false
	}
	meta, err := event.MetaFromHeader(msg.Header)
	if err != nil {
		return nil, false
	}
	if !meta.Exact() {
		ns, name, namespaced := strings.Cut(key, "/")
		if !namespaced {
			ns, name = "", key
		}
		meta.Namespace, meta.Name = ns, name
	}
	metadata := map[string]any{"name": meta.Name, "uid": meta.UID, "resourceVersion": meta.ResourceVersion}
	if meta.Namespace != "" {
		metadata["namespace"] = meta.Namespace
	}
	b, err := json.Marshal(map[string]any{"apiVersion": meta.APIVersion(), "kind": meta.Kind, "metadata": metadata})
	return b, err == nil
}

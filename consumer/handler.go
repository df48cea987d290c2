package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultRetryDelays are the delays before a message whose handler failed is delivered
// again, by delivery attempt (the last one repeats): quick for a blip, backing off to half a
// minute so that a dependency that is down is not hammered.
var DefaultRetryDelays = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}

// DefaultInProgressInterval is how often a running handler tells the server it is still at
// work: a third of the server's default AckWait (30s), so two signals may be lost before the
// message is delivered again. Use InProgressEvery with a consumer of another AckWait.
const DefaultInProgressInterval = 10 * time.Second

// recordTimeout bounds the tracker's write of work already done, which runs even when the
// Handler's context has ended (the service stops): long enough for a KV put that waits on a
// JetStream round trip, short enough that a stop is not held up by a store that hangs.
const recordTimeout = 5 * time.Second

// Reasons given to the server when a message is terminated.
const (
	invalidEventReason = "not a kube-nats-relay event"
	handlerTermReason  = "handler terminated the event"
)

// ErrTerminate, wrapped in the error a HandlerFunc returns, says that the event can never be
// handled (an object the service cannot read, say): Handler terminates the message instead
// of having it delivered again.
var ErrTerminate = errors.New("terminate the message")

// HandlerFunc handles one event, in the shape of the CloudEvents SDK receiver: nil when the
// work is done, an error to have the event delivered again later.
type HandlerFunc func(ctx context.Context, e Event) error

// HandlerOption changes what Handler does.
type HandlerOption func(*handlerOptions) error

// handlerOptions collects the options.
type handlerOptions struct {
	tracker  *Tracker
	delays   []time.Duration
	progress time.Duration
	onError  func(msg jetstream.Msg, err error)
}

// TrackWith makes the handler skip (and acknowledge) an event the tracker says is not to be
// applied, and record each event handled before acknowledging it.
func TrackWith(t *Tracker) HandlerOption {
	return func(o *handlerOptions) error {
		if t == nil {
			return errors.New("track with: nil tracker")
		}
		o.tracker = t
		return nil
	}
}

// RetryDelays sets the delays before a failed event is delivered again: the first after the
// first failure, and so on, the last one for every later failure.
func RetryDelays(delays ...time.Duration) HandlerOption {
	return func(o *handlerOptions) error {
		if len(delays) == 0 {
			return errors.New("retry delays: none given")
		}
		for _, d := range delays {
			if d < 0 {
				return fmt.Errorf("retry delay %s: want zero or more", d)
			}
		}
		o.delays = delays
		return nil
	}
}

// InProgressEvery sets how often a running handler tells the server it is still at work, so
// that work longer than the consumer's AckWait is not delivered again meanwhile. Make it
// well below the AckWait.
func InProgressEvery(d time.Duration) HandlerOption {
	return func(o *handlerOptions) error {
		if d <= 0 {
			return fmt.Errorf("in progress every %s: want a positive duration", d)
		}
		o.progress = d
		return nil
	}
}

// OnError is called with each message that was terminated, not handled, or whose
// acknowledgement failed, and the reason: log it there. Without it such errors go unseen.
func OnError(fn func(msg jetstream.Msg, err error)) HandlerOption {
	return func(o *handlerOptions) error {
		if fn == nil {
			return errors.New("on error: nil function")
		}
		o.onError = fn
		return nil
	}
}

// Handler adapts fn to a jetstream.MessageHandler (for Consumer.Consume):
//
//   - a message that is not a relay event (Decode fails), or, with TrackWith, whose
//     resourceVersion is not an integer, is terminated (Term): delivering it again would not
//     help (without a tracker the resourceVersion is not checked: fn gets the event);
//   - with TrackWith, an event the tracker does not apply is acknowledged without calling fn;
//   - fn runs with a context derived from ctx, and while it runs the server is told every
//     InProgressEvery that the work goes on;
//   - nil from fn acknowledges the message (after recording it in the tracker); an error
//     wrapping ErrTerminate terminates it;
//   - an error from fn, or from the tracker, naks the message with the delay RetryDelays
//     sets for its delivery attempt; once ctx has ended (the service stops), at once, so
//     another instance takes it without waiting.
//
// Every such outcome other than success goes to OnError. A failed acknowledgement only means
// the message comes again: the tracker (or the service's own record) recognises it.
func Handler(ctx context.Context, fn HandlerFunc, opts ...HandlerOption) (jetstream.MessageHandler, error) {
	o := handlerOptions{delays: DefaultRetryDelays, progress: DefaultInProgressInterval,
		onError: func(jetstream.Msg, error) {}}
	var errs []error
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			errs = append(errs, err)
		}
	}
	if fn == nil {
		errs = append(errs, errors.New("nil handler function"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("handler: %w", err)
	}
	return func(msg jetstream.Msg) { handleMsg(ctx, msg, fn, &o) }, nil
}

// handleMsg is one message's way through the Handler.
func handleMsg(ctx context.Context, msg jetstream.Msg, fn HandlerFunc, o *handlerOptions) {
	e, err := Decode(msg)
	if err != nil {
		termMsg(msg, err, o)
		return
	}
	if o.tracker != nil {
		d, err := o.tracker.Check(ctx, e)
		switch {
		case errors.Is(err, ErrInvalidResourceVersion):
			termMsg(msg, err, o)
			return
		case err != nil:
			nakMsg(ctx, msg, err, o)
			return
		case d != Apply:
			ackMsg(msg, o)
			return
		}
	}
	if err := runHandler(ctx, msg, e, fn, o.progress); errors.Is(err, ErrTerminate) {
		termMsg(msg, fmt.Errorf("handle %s: %w", e.ID(), err), o)
		return
	} else if err != nil {
		nakMsg(ctx, msg, fmt.Errorf("handle %s: %w", e.ID(), err), o)
		return
	}
	if o.tracker != nil {
		// The work is done: record it even if the service is stopping meanwhile, or the
		// nak that follows a failed write has the event handled a second time.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		err := o.tracker.Record(rctx, e)
		cancel()
		if err != nil {
			nakMsg(ctx, msg, err, o)
			return
		}
	}
	ackMsg(msg, o)
}

// runHandler calls fn, telling the server every interval that the message is in progress.
func runHandler(ctx context.Context, msg jetstream.Msg, e Event, fn HandlerFunc, interval time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = msg.InProgress() // a lost signal costs at most a redelivery
			}
		}
	}()
	err := fn(ctx, e)
	cancel()
	<-stopped
	return err
}

// termMsg terminates a message that cannot be handled.
func termMsg(msg jetstream.Msg, err error, o *handlerOptions) {
	o.onError(msg, fmt.Errorf("terminated: %w", err))
	reason := invalidEventReason
	if errors.Is(err, ErrTerminate) {
		reason = handlerTermReason
	}
	if terr := msg.TermWithReason(reason); terr != nil {
		o.onError(msg, fmt.Errorf("terminate: %w", terr))
	}
}

// nakMsg naks a message so that it is delivered again after its attempt's delay.
func nakMsg(ctx context.Context, msg jetstream.Msg, err error, o *handlerOptions) {
	o.onError(msg, err)
	var nerr error
	if ctx.Err() != nil {
		nerr = msg.Nak()
	} else {
		nerr = msg.NakWithDelay(retryDelay(msg, o.delays))
	}
	if nerr != nil {
		o.onError(msg, fmt.Errorf("nak: %w", nerr))
	}
}

// retryDelay is the delay for the message's delivery attempt.
func retryDelay(msg jetstream.Msg, delays []time.Duration) time.Duration {
	i := 0
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 0 {
		i = int(min(md.NumDelivered-1, uint64(len(delays)-1)))
	}
	return delays[i]
}

// ackMsg acknowledges a message handled or skipped.
func ackMsg(msg jetstream.Msg, o *handlerOptions) {
	if err := msg.Ack(); err != nil {
		o.onError(msg, fmt.Errorf("ack: %w", err))
	}
}

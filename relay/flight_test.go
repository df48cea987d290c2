package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"
)

// denyingPublisher is an ackedPublisher scripted to hit the window between a publish's
// registration with Denials and its write: a publish to a subject in denied is refused by
// the server (Denials.Observe) and then fails to be written (nats.ErrMaxPayload), as when
// the connection's error handler runs before PublishMsg returns. Other publishes are acked.
type denyingPublisher struct {
	denials *Denials
	denied  map[string]bool

	mu   sync.Mutex
	sent []string
}

func (p *denyingPublisher) PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return nil, errors.New("denying publisher: use PublishAcked")
}

func (p *denyingPublisher) PublishAcked(msg *nats.Msg, h AckHandler) error {
	p.mu.Lock()
	p.sent = append(p.sent, msg.Subject)
	p.mu.Unlock()
	if p.denied[msg.Subject] {
		p.denials.Observe(fmt.Errorf("%w: Permissions Violation for Publish to %q", nats.ErrPermissionViolation, msg.Subject))
		return nats.ErrMaxPayload
	}
	go h.Acked(&jetstream.PubAck{}, nil)
	return nil
}

func (p *denyingPublisher) subjects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent)
}

func TestPipelineGivesEachPublishOneOutcome(t *testing.T) {
	// Three changes of one object, each denied and failing to be written: each must be
	// handled once (given up as denied), in order, and hold nothing after; a publish with
	// two outcomes would send a change twice, or finish an object twice and crash.
	d, b := NewDenials(), NewBudget(1<<20)
	pub := &denyingPublisher{denials: d, denied: map[string]bool{"a1": true, "a2": true, "a3": true}}
	ck := &checkpoints{}
	p := newPipeline(pub, 100, 3, clocktesting.NewFakeClock(time.Now()), ck.advance, nil)
	p.denials, p.budget = d, b
	var (
		mu      sync.Mutex
		refused []string
	)
	p.onRefused = func(it *item, _ Step, why Refusal, _ error, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, it.current().Subject+" "+string(why))
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- p.run(ctx, stop) }()

	for i, subject := range []string{"a1", "a2", "a3"} {
		it := change("a", subject, fmt.Sprint(i+1))
		it.charged, _ = b.tryChange(1000)
		p.in <- it
	}
	// Taken only once the three have let go of the pipeline's outstanding slots: a denied
	// publish that was never written is not held by the client.
	p.in <- change("b", "b", "4")
	waitCheckpoint(t, ck, "4")
	close(p.in)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return within 5s of its input closing")
	}
	// b may go out before a3 (a1's slot is free once it is given up), never a change twice.
	got := pub.subjects()
	ofA := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s == "b" })
	if want := []string{"a1", "a2", "a3"}; len(got) != 4 || !slices.Equal(ofA, want) {
		t.Errorf("publishes: got %v, want %v in order and b, each once", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"a1 " + string(RefusedDenied), "a2 " + string(RefusedDenied), "a3 " + string(RefusedDenied)}
	if !slices.Equal(refused, want) {
		t.Errorf("refusals: got %v, want %v", refused, want)
	}
	if got := b.Used(); got != 0 {
		t.Errorf("budget after the run: got %d bytes, want 0", got)
	}
}

// holdingPublisher is an ackedPublisher that hands each publish's handler to the test,
// which decides its outcome.
type holdingPublisher struct{ handlers chan AckHandler }

func (p holdingPublisher) PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return nil, errors.New("holding publisher: use PublishAcked")
}

func (p holdingPublisher) PublishAcked(_ *nats.Msg, h AckHandler) error {
	p.handlers <- h
	return nil
}

func TestADeniedPublishLetGoDoesNotWaitForItsPipeline(t *testing.T) {
	// The publisher tells every source's publishes from one goroutine: letting go of a denied
	// publish must not wait until its pipeline, busy elsewhere, reads it.
	d := NewDenials()
	pub := holdingPublisher{handlers: make(chan AckHandler, 10)}
	advancing, unblock := make(chan string, 10), make(chan struct{})
	p := newPipeline(pub, 100, 2, clocktesting.NewFakeClock(time.Now()), func(rv string, _ bool) {
		advancing <- rv
		<-unblock // the pipeline is stuck, as behind a slow checkpoint
	}, nil)
	p.denials = d
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, make(chan struct{})) }()

	p.in <- change("a", "denied", "1")
	h := <-pub.handlers
	d.Observe(fmt.Errorf("%w: Permissions Violation for Publish to %q", nats.ErrPermissionViolation, "denied"))
	if rv := <-advancing; rv != "1" {
		t.Fatalf("checkpoint: got %q, want 1", rv)
	}
	letGo := make(chan struct{})
	go func() {
		h.Acked(nil, jetstream.ErrAsyncPublishTimeout) // the client lets the denied publish go
		close(letGo)
	}()
	waitClosed(t, letGo, "return from the handler of a denied publish while its pipeline is busy")
	close(unblock)
	close(p.in)
	if err := <-done; err != nil {
		t.Fatalf("run: got %v, want nil", err)
	}
}

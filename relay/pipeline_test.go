package relay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fakeFuture is a publish whose outcome the test decides.
type fakeFuture struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
	err chan error
}

func (f *fakeFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *fakeFuture) Err() <-chan error            { return f.err }
func (f *fakeFuture) Msg() *nats.Msg               { return f.msg }

func (f *fakeFuture) ack()           { f.ok <- &jetstream.PubAck{} }
func (f *fakeFuture) fail(err error) { f.err <- err }

// fakePublisher hands every publish to the test through sent.
type fakePublisher struct {
	sent chan *fakeFuture
}

func (p *fakePublisher) PublishMsgAsync(msg *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f := &fakeFuture{msg: msg, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	p.sent <- f
	return f, nil
}

type checkpoints struct {
	mu  sync.Mutex
	rvs []string
}

func (c *checkpoints) advance(rv string, _ bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rvs = append(c.rvs, rv)
}

func (c *checkpoints) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rvs) == 0 {
		return ""
	}
	return c.rvs[len(c.rvs)-1]
}

func change(key, subject, rv string) *item {
	return &item{key: key, msg: &nats.Msg{Subject: subject}, rv: rv}
}

type pipelineRun struct {
	p    *pipeline
	pub  *fakePublisher
	ck   *checkpoints
	stop chan struct{}
	done chan error
}

func startPipeline(t *testing.T, maxOutstanding int) *pipelineRun {
	t.Helper()
	r := &pipelineRun{pub: &fakePublisher{sent: make(chan *fakeFuture, 100)}, ck: &checkpoints{}, stop: make(chan struct{}), done: make(chan error, 1)}
	r.p = newPipeline(r.pub, 100, maxOutstanding, r.ck.advance, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { r.done <- r.p.run(ctx, r.stop) }()
	return r
}

func (r *pipelineRun) next(t *testing.T) *fakeFuture {
	t.Helper()
	select {
	case f := <-r.pub.sent:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no publish within 5s")
		return nil
	}
}

func (r *pipelineRun) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case f := <-r.pub.sent:
		t.Fatalf("unexpected publish of %s", f.msg.Subject)
	case <-time.After(d):
	}
}

func waitCheckpoint(t *testing.T, ck *checkpoints, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ck.last() != want {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint: got %q, want %q", ck.last(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPipelineKeepsObjectOrderAcrossFailures(t *testing.T) {
	r := startPipeline(t, 10)
	r.p.in <- change("a", "a1", "10")
	r.p.in <- change("b", "b1", "11")
	r.p.in <- change("a", "a2", "12")

	a1 := r.next(t)
	b1 := r.next(t)
	if a1.msg.Subject != "a1" || b1.msg.Subject != "b1" {
		t.Fatalf("first publishes: got %s, %s; want a1, b1", a1.msg.Subject, b1.msg.Subject)
	}
	// a2 must wait for a1, even while b1 completes.
	b1.ack()
	r.none(t, 50*time.Millisecond)
	a1.fail(errors.New("nats: timeout"))
	retry := r.next(t)
	if retry.msg.Subject != "a1" {
		t.Fatalf("after a1 failed: got %s, want the retry of a1", retry.msg.Subject)
	}
	if r.ck.last() != "" {
		t.Fatalf("checkpoint moved to %s past the unacked a1", r.ck.last())
	}
	retry.ack()
	a2 := r.next(t)
	if a2.msg.Subject != "a2" {
		t.Fatalf("after a1 acked: got %s, want a2", a2.msg.Subject)
	}
	waitCheckpoint(t, r.ck, "11")
	a2.ack()
	waitCheckpoint(t, r.ck, "12")
}

func TestPipelineCheckpointWaitsForEveryEarlierItem(t *testing.T) {
	r := startPipeline(t, 10)
	// A list: objects whose resourceVersions are out of order, then the list's mark.
	r.p.in <- change("x", "x", "")
	r.p.in <- change("y", "y", "")
	r.p.in <- &item{rv: "50", urgent: true}
	x, y := r.next(t), r.next(t)
	y.ack()
	time.Sleep(20 * time.Millisecond)
	if got := r.ck.last(); got != "" {
		t.Fatalf("checkpoint %q before x was acked, want none", got)
	}
	x.ack()
	waitCheckpoint(t, r.ck, "50")
}

func TestPipelineBoundsOutstandingItems(t *testing.T) {
	r := startPipeline(t, 2)
	for _, k := range []string{"a", "b", "c"} {
		r.p.in <- change(k, k, "")
	}
	first, second := r.next(t), r.next(t)
	r.none(t, 50*time.Millisecond)
	first.ack()
	if third := r.next(t); third.msg.Subject != "c" {
		t.Fatalf("third publish: got %s, want c", third.msg.Subject)
	}
	second.ack()
}

func TestPipelineStopWaitsForInflightOnly(t *testing.T) {
	r := startPipeline(t, 10)
	r.p.in <- change("a", "a1", "1")
	r.p.in <- change("a", "a2", "2")
	a1 := r.next(t)
	close(r.stop)
	select {
	case err := <-r.done:
		t.Fatalf("pipeline returned %v with a publish in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	a1.ack()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pipeline did not return after the last ack")
	}
	r.none(t, 20*time.Millisecond) // a2 was queued, never sent
	if got := r.ck.last(); got != "1" {
		t.Errorf("checkpoint after stop: got %q, want 1", got)
	}
}

func TestPipelineDrainsWhenInputCloses(t *testing.T) {
	r := startPipeline(t, 10)
	r.p.in <- change("a", "a1", "1")
	r.p.in <- &item{rv: "3"}
	close(r.p.in)
	r.next(t).ack()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pipeline did not return after input closed and all acked")
	}
	if got := r.ck.last(); got != "3" {
		t.Errorf("checkpoint: got %q, want 3", got)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	tests := []struct {
		attempts int
		want     time.Duration
	}{
		{1, retryBackoffMin}, {2, 2 * retryBackoffMin}, {3, 4 * retryBackoffMin}, {100, retryBackoffMax},
	}
	for _, tt := range tests {
		if got := backoff(tt.attempts); got != tt.want {
			t.Errorf("backoff(%d): got %s, want %s", tt.attempts, got, tt.want)
		}
	}
}

func TestPipelineRecordsIndexAfterEventAndBeforeNext(t *testing.T) {
	r := startPipeline(t, 10)
	a1 := change("a", "a1", "1")
	a1.index = &nats.Msg{Subject: "idx.a1"}
	a2 := change("a", "a2", "2")
	a2.index = &nats.Msg{Subject: "idx.a2"}
	r.p.in <- a1
	r.p.in <- a2

	ev := r.next(t)
	if ev.msg.Subject != "a1" {
		t.Fatalf("first publish: got %s, want a1", ev.msg.Subject)
	}
	ev.ack()
	idx := r.next(t)
	if idx.msg.Subject != "idx.a1" {
		t.Fatalf("after a1's ack: got %s, want its index record", idx.msg.Subject)
	}
	if got := r.ck.last(); got != "" {
		t.Fatalf("checkpoint %q before the index record was acked", got)
	}
	idx.fail(errors.New("nats: timeout"))
	retry := r.next(t)
	if retry.msg.Subject != "idx.a1" {
		t.Fatalf("after the index record failed: got %s, want its retry (not the event again)", retry.msg.Subject)
	}
	retry.ack()
	waitCheckpoint(t, r.ck, "1")
	if next := r.next(t); next.msg.Subject != "a2" {
		t.Fatalf("then: got %s, want a2", next.msg.Subject)
	}
}

func TestPipelineWritesMirrorBeforeEvent(t *testing.T) {
	r := startPipeline(t, 10)
	it := change("a", "a1", "1")
	it.mirror = &nats.Msg{Subject: "mirror.a"}
	it.index = &nats.Msg{Subject: "idx.a1"}
	r.p.in <- it
	for _, want := range []string{"mirror.a", "a1", "idx.a1"} {
		f := r.next(t)
		if f.msg.Subject != want {
			t.Fatalf("publish: got %s, want %s", f.msg.Subject, want)
		}
		if r.ck.last() != "" {
			t.Fatalf("checkpoint %q before every step was acked", r.ck.last())
		}
		f.ack()
	}
	waitCheckpoint(t, r.ck, "1")
}

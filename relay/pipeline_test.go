package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
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
	p     *pipeline
	pub   *fakePublisher
	ck    *checkpoints
	clock *clocktesting.FakeClock
	stop  chan struct{}
	done  chan error
}

// startPipeline runs a pipeline publishing to a fake, on a fake clock; setup, when given,
// configures it before the run starts.
func startPipeline(t *testing.T, maxOutstanding int, setup ...func(p *pipeline)) *pipelineRun {
	t.Helper()
	r := &pipelineRun{pub: &fakePublisher{sent: make(chan *fakeFuture, 100)}, ck: &checkpoints{}, stop: make(chan struct{}), done: make(chan error, 1),
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	r.p = newPipeline(r.pub, 100, maxOutstanding, r.clock, r.ck.advance, nil)
	for _, f := range setup {
		f(r.p)
	}
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

// none fails the test for a publish the test has not taken. The caller first makes sure that
// the pipeline has done whatever it would have done (see probe), or has returned.
func (r *pipelineRun) none(t *testing.T) {
	t.Helper()
	select {
	case f := <-r.pub.sent:
		t.Fatalf("unexpected publish of %s", f.msg.Subject)
	default:
	}
}

// probe sends a change of an object of its own and takes its publish (acking it): the
// pipeline takes the probe after it has finished handling every result it had begun to
// handle, and publishes it after whatever that handling published, which probe reports.
// Calling it once the pipeline has begun handling an ack (see acked) shows whether that ack
// let anything out, without waiting for a time.
func (r *pipelineRun) probe(t *testing.T) {
	t.Helper()
	r.p.in <- change("probe", "probe", "")
	if f := r.next(t); f.msg.Subject != "probe" {
		t.Fatalf("unexpected publish of %s", f.msg.Subject)
	} else {
		f.ack()
	}
}

// acked returns a channel closed once the pipeline handles the ack of it's event.
func acked(it *item) <-chan struct{} {
	ch := make(chan struct{})
	it.onAck = func(*jetstream.PubAck) { close(ch) }
	return ch
}

// waitClosed waits until ch is closed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
	}
}

// retryDue steps the clock past the backoff of the failed publish the pipeline waits to
// retry (after it has set its timer).
func (r *pipelineRun) retryDue(t *testing.T) {
	t.Helper()
	waitFor(t, "the retry's timer", r.clock.HasWaiters)
	r.clock.Step(retryBackoffMax)
}

func waitCheckpoint(t *testing.T, ck *checkpoints, want string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return ck.last() == want, nil })
	if err != nil {
		t.Fatalf("checkpoint: got %q, want %q", ck.last(), want)
	}
}

func TestPipelineKeepsObjectOrderAcrossFailures(t *testing.T) {
	r := startPipeline(t, 10)
	r.p.in <- change("a", "a1", "10")
	itB1 := change("b", "b1", "11")
	b1Acked := acked(itB1)
	r.p.in <- itB1
	r.p.in <- change("a", "a2", "12")

	a1 := r.next(t)
	b1 := r.next(t)
	if a1.msg.Subject != "a1" || b1.msg.Subject != "b1" {
		t.Fatalf("first publishes: got %s, %s; want a1, b1", a1.msg.Subject, b1.msg.Subject)
	}
	// a2 must wait for a1, even while b1 completes.
	b1.ack()
	waitClosed(t, b1Acked, "ack of b1")
	r.probe(t)
	a1.fail(errors.New("nats: timeout"))
	r.retryDue(t)
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
	itY := change("y", "y", "")
	yAcked := acked(itY)
	r.p.in <- itY
	r.p.in <- &item{rv: "50", urgent: true}
	x, y := r.next(t), r.next(t)
	y.ack()
	waitClosed(t, yAcked, "ack of y")
	r.probe(t) // the checkpoint moves while the pipeline handles an ack, before it takes the probe
	if got := r.ck.last(); got != "" {
		t.Fatalf("checkpoint %q before x was acked, want none", got)
	}
	x.ack()
	waitCheckpoint(t, r.ck, "50")
}

func TestPipelineBoundsOutstandingItems(t *testing.T) {
	// In a bubble, synctest.Wait returns once the pipeline waits with nothing left to do.
	synctest.Test(t, func(t *testing.T) {
		r := startPipeline(t, 2)
		for _, k := range []string{"a", "b", "c"} {
			r.p.in <- change(k, k, "")
		}
		first, second := r.next(t), r.next(t)
		synctest.Wait()
		r.none(t)
		first.ack()
		third := r.next(t)
		if third.msg.Subject != "c" {
			t.Fatalf("third publish: got %s, want c", third.msg.Subject)
		}
		second.ack()
		third.ack()
	})
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
	default:
		// Returning before a1's ack would also leave the checkpoint short of 1 (below).
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
	r.none(t) // a2 was queued, never sent
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
	r.retryDue(t)
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

// refusedStep is one call of the pipeline's onRefused.
type refusedStep struct {
	subject   string
	step      Step
	why       Refusal
	reference bool
}

// nextRefusal returns the next refused step reported on ch.
func nextRefusal(t *testing.T, ch chan refusedStep) refusedStep {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no refusal within 5s")
		return refusedStep{}
	}
}

// startRefusingPipeline is startPipeline with onRefused recorded before the run starts.
func startRefusingPipeline(t *testing.T, maxOutstanding int) (*pipelineRun, chan refusedStep) {
	t.Helper()
	refusals := make(chan refusedStep, 100)
	r := startPipeline(t, maxOutstanding, func(p *pipeline) {
		p.onRefused = func(it *item, step Step, why Refusal, _ error, reference bool) {
			refusals <- refusedStep{subject: it.current().Subject, step: step, why: why, reference: reference}
		}
	})
	return r, refusals
}

func apiError(code jetstream.ErrorCode, desc string) error {
	return &jetstream.APIError{Code: 400, ErrorCode: code, Description: desc}
}

func TestRefusalOfTellsPermanentFromTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Refusal
	}{
		{"stream max_msg_size", apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"), RefusedTooLarge},
		{"header over 64k", apiError(10097, "header size exceeds maximum allowed of 64k"), RefusedTooLarge},
		{"store message too large", apiError(10077, "message too large"), RefusedTooLarge},
		{"client max_payload", nats.ErrMaxPayload, RefusedTooLarge},
		{"wrapped client max_payload", fmt.Errorf("publish: %w", nats.ErrMaxPayload), RefusedTooLarge},
		{"permissions violation", fmt.Errorf("%w for publish to %q", ErrPublishDenied, "kube.a"), RefusedDenied},
		{"per-subject limit with discard new", apiError(10077, "maximum messages per subject exceeded"), RefusedSubjectFull},
		{"control line", fmt.Errorf("%w: 5000 bytes", errSubjectTooLong), RefusedSubjectTooLong},
		{"invalid subject", nats.ErrBadSubject, RefusedBadSubject},
		{"rollup not allowed", apiError(10111, "rollup not permitted"), RefusedRejected},
		{"message TTL disabled", apiError(10166, "per-message TTL is disabled"), RefusedRejected},
		{"ack timeout", jetstream.ErrAsyncPublishTimeout, ""},
		{"no responders during an election", jetstream.ErrNoStreamResponse, ""},
		{"disconnected", nats.ErrConnectionClosed, ""},
		{"reconnect buffer full", nats.ErrReconnectBufExceeded, ""},
		{"stalled", jetstream.ErrTooManyStalledMsgs, ""},
		{"stream full with discard new: can drain", apiError(10077, "maximum bytes exceeded"), ""},
		{"stream message limit with discard new: can drain", apiError(10077, "maximum messages exceeded"), ""},
		{"account storage exhausted: can drain", apiError(10002, "resource limits exceeded for account"), ""},
		{"insufficient resources", apiError(10023, "insufficient resources"), ""},
		{"sealed stream: the operator replaces it", apiError(10109, "invalid operation on sealed stream"), ""},
		{"not leader", apiError(10008, "JetStream system temporarily unavailable"), ""},
		{"unknown error", errors.New("something else"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusalOf(tt.err); got != tt.want {
				t.Errorf("refusalOf(%v): got %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestPipelineMovesPastARefusedChangeKeepingObjectOrder(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	r.p.in <- change("a", "a1", "10")
	r.p.in <- change("a", "a2", "11")
	itB1 := change("b", "b1", "12")
	b1Acked := acked(itB1)
	r.p.in <- itB1

	a1, b1 := r.next(t), r.next(t)
	if a1.msg.Subject != "a1" || b1.msg.Subject != "b1" {
		t.Fatalf("first publishes: got %s, %s; want a1, b1", a1.msg.Subject, b1.msg.Subject)
	}
	b1.ack()
	waitClosed(t, b1Acked, "ack of b1")
	r.probe(t) // a2 waits behind a1
	a1.fail(fmt.Errorf("%w for publish to %q", ErrPublishDenied, "a1"))
	if got := nextRefusal(t, refusals); got != (refusedStep{subject: "a1", step: StepEvent, why: RefusedDenied}) {
		t.Fatalf("refusal: got %+v, want a1's event denied, given up", got)
	}
	a2 := r.next(t)
	if a2.msg.Subject != "a2" {
		t.Fatalf("after a1 was refused: got %s, want a2 (not a1 again)", a2.msg.Subject)
	}
	waitCheckpoint(t, r.ck, "10")
	a2.ack()
	waitCheckpoint(t, r.ck, "12")
}

func TestPipelineSendsTheReferenceOfAnEventRefusedAsTooLarge(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	it := change("a", "a1", "1")
	it.msg.Data = []byte(`{"big":true}`)
	it.msg.Header = nats.Header{event.HeaderPayload: {string(event.PayloadObjectAndOld)}}
	it.index = &nats.Msg{Subject: "idx.a1"}
	r.p.in <- it

	r.next(t).fail(apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"))
	if got := nextRefusal(t, refusals); !got.reference || got.why != RefusedTooLarge {
		t.Fatalf("refusal: got %+v, want a reference sent for too-large", got)
	}
	ref := r.next(t)
	if ref.msg.Subject != "a1" || len(ref.msg.Data) != 0 {
		t.Fatalf("after the refusal: got %s with %d bytes, want a1 without body", ref.msg.Subject, len(ref.msg.Data))
	}
	if got := ref.msg.Header.Get(event.HeaderBodyOmitted); got != event.BodyOmittedStreamLimit {
		t.Errorf("body-omitted header: got %q, want %q", got, event.BodyOmittedStreamLimit)
	}
	if got := ref.msg.Header.Get(event.HeaderPayload); got != "" {
		t.Errorf("payload header on the reference: got %q, want none", got)
	}
	ref.ack()
	if idx := r.next(t); idx.msg.Subject != "idx.a1" {
		t.Fatalf("after the reference's ack: got %s, want the index record", idx.msg.Subject)
	} else {
		idx.ack()
	}
	waitCheckpoint(t, r.ck, "1")

	// The reference refused too: the change is given up, without its index record.
	it2 := change("a", "a2", "2")
	it2.msg.Data = []byte(`{}`)
	it2.msg.Header = nats.Header{}
	it2.index = &nats.Msg{Subject: "idx.a2"}
	r.p.in <- it2
	r.next(t).fail(apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"))
	nextRefusal(t, refusals)
	r.next(t).fail(apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"))
	if got := nextRefusal(t, refusals); got.reference || got.step != StepEvent {
		t.Fatalf("second refusal: got %+v, want the event given up", got)
	}
	waitCheckpoint(t, r.ck, "2")
	r.none(t) // no index record for an event never published: it would have come before the checkpoint
}

func TestPipelinePublishesTheEventAfterARefusedMirrorRecord(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	it := change("a", "a1", "1")
	it.mirror = &nats.Msg{Subject: "mirror.a", Data: []byte("state")}
	it.index = &nats.Msg{Subject: "idx.a1"}
	r.p.in <- it
	r.next(t).fail(apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"))
	if got := nextRefusal(t, refusals); got != (refusedStep{subject: "mirror.a", step: StepMirror, why: RefusedTooLarge}) {
		t.Fatalf("refusal: got %+v, want the mirror record given up", got)
	}
	for _, want := range []string{"a1", "idx.a1"} {
		f := r.next(t)
		if f.msg.Subject != want {
			t.Fatalf("publish: got %s, want %s", f.msg.Subject, want)
		}
		f.ack()
	}
	waitCheckpoint(t, r.ck, "1")
}

func TestPipelineNeverSendsAControlLineTheServerRefuses(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	long := strings.Repeat("x", maxControlLine)
	r.p.in <- change("a", long, "1")
	r.p.in <- change("a", "a2", "2")
	if got := nextRefusal(t, refusals); got.why != RefusedSubjectTooLong || got.step != StepEvent {
		t.Fatalf("refusal: got %+v, want subject-too-long", got)
	}
	f := r.next(t)
	if f.msg.Subject != "a2" {
		t.Fatalf("publish: got %.20s, want a2 (the long subject never sent)", f.msg.Subject)
	}
	f.ack()
	waitCheckpoint(t, r.ck, "2")
}

func TestFitsControlLineCountsSubjectReplyAndSizes(t *testing.T) {
	h := nats.Header{"k": {"v"}}
	for _, replyMax := range []int{asyncReplyMax, 200} {
		// The arguments: subject, reply, header size, total size, three spaces.
		room := maxControlLine - replyMax - 3 - len(strconv.Itoa(event.HeaderSize(h)))*2
		if !fitsControlLine(&nats.Msg{Subject: strings.Repeat("s", room), Header: h}, replyMax) {
			t.Errorf("a subject of %d bytes, a reply of up to %d: got refused, want it to fit", room, replyMax)
		}
		if fitsControlLine(&nats.Msg{Subject: strings.Repeat("s", room+1), Header: h}, replyMax) {
			t.Errorf("a subject of %d bytes, a reply of up to %d: got fits, want refused", room+1, replyMax)
		}
	}
}

func TestFitsControlLineCostsNoAllocationForAnOrdinarySubject(t *testing.T) {
	// It runs for every step of every change: an event's headers and a body of some KiB.
	meta := event.Meta{Cluster: "c", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "default",
		Name: "app", UID: "00000000-0000-0000-0000-000000000000", ResourceVersion: "12345", Type: event.Modified, Origin: event.Live}
	msg := &nats.Msg{Subject: meta.Subject("kube").String(), Header: meta.Header(), Data: make([]byte, 4096)}
	if allocs := testing.AllocsPerRun(100, func() {
		if !fitsControlLine(msg, asyncReplyMax) {
			t.Fatal("an ordinary event: got refused, want it to fit")
		}
	}); allocs != 0 {
		t.Errorf("allocations per call: got %v, want 0", allocs)
	}
}

func TestDenialsFailThePublishInFlightAtOnce(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	d := NewDenials()
	r.p.denials = d
	r.p.in <- change("a", "kube.c.core.v1.configmaps.denied.a.added", "1")
	r.p.in <- change("b", "kube.c.core.v1.configmaps.ok.b.added", "2")
	a, b := r.next(t), r.next(t)
	// As nats.go reports the server's -ERR on the connection's error handler.
	err := fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "kube.c.core.v1.configmaps.denied.a.added"`)
	if !d.Observe(err) {
		t.Fatal("Observe: got false for a publish permissions violation")
	}
	if got := nextRefusal(t, refusals); got.why != RefusedDenied || got.subject != a.msg.Subject {
		t.Fatalf("refusal: got %+v, want %s denied", got, a.msg.Subject)
	}
	if d.Observe(errors.New("nats: slow consumer, messages dropped")) {
		t.Error("Observe: got true for another async error")
	}
	b.ack()
	waitCheckpoint(t, r.ck, "2")
}

func TestPipelineRecordsTheIdentityOfAnObjectTheMirrorRefuses(t *testing.T) {
	tests := []struct{ name, objectName string }{
		{"a short name", "big"},
		// A name longer than event.MaxHeaderValueLen reaches the headers in the hashed form,
		// so the identity record cannot take the name from them.
		{"a name past the header bound", strings.Repeat("long name ", 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, refusals := startRefusingPipeline(t, 10)
			meta := event.Meta{Cluster: "c", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns", Name: tt.objectName,
				UID: "u-1", ResourceVersion: "7", Type: event.Added, Origin: event.Live}
			it := &item{key: "ns/" + tt.objectName, msg: &nats.Msg{Subject: "ev", Header: meta.Header()}, rv: "7",
				mirror: &nats.Msg{Subject: "mirror.big", Data: []byte(`{"data":"` + strings.Repeat("x", 100) + `"}`)}}
			r.p.in <- it
			tooLarge := apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed")
			r.next(t).fail(tooLarge)
			if got := nextRefusal(t, refusals); !got.reference || got.step != StepMirror {
				t.Fatalf("refusal: got %+v, want the mirror record reduced", got)
			}
			ref := r.next(t)
			var state struct {
				Kind     string `json:"kind"`
				Metadata struct{ Namespace, Name, UID, ResourceVersion string }
			}
			if err := json.Unmarshal(ref.msg.Data, &state); err != nil {
				t.Fatalf("reduced mirror record: %v", err)
			}
			if state.Kind != "ConfigMap" || state.Metadata.Name != tt.objectName || state.Metadata.Namespace != "ns" ||
				state.Metadata.UID != "u-1" || state.Metadata.ResourceVersion != "7" {
				t.Errorf("reduced mirror record: got kind %q, ns %q, a name of %d bytes, uid %q, rv %q; want the object's identity (name of %d bytes)",
					state.Kind, state.Metadata.Namespace, len(state.Metadata.Name), state.Metadata.UID, state.Metadata.ResourceVersion, len(tt.objectName))
			}
			// Refused even so: given up; the event still goes out.
			ref.fail(tooLarge)
			if got := nextRefusal(t, refusals); got.reference || got.step != StepMirror {
				t.Fatalf("second refusal: got %+v, want the mirror record given up", got)
			}
			ev := r.next(t)
			if ev.msg.Subject != "ev" {
				t.Fatalf("publish: got %s, want the event", ev.msg.Subject)
			}
			ev.ack()
			waitCheckpoint(t, r.ck, "7")
		})
	}
}

func TestDeniedSubjectReadsOnlyPublishViolations(t *testing.T) {
	tests := []struct {
		name, text, want string
		ok               bool
	}{
		{"publish", `nats: permissions violation: Permissions Violation for Publish to "kube.c.core.v1.configmaps.ns.a.added"`, "kube.c.core.v1.configmaps.ns.a.added", true},
		{"quoted characters", `nats: permissions violation: Permissions Violation for Publish to "kube.c.x\"y"`, `kube.c.x"y`, true},
		{"reply", `nats: permissions violation: Permissions Violation for Publish with Reply of "_INBOX.abc"`, "", false},
		{"subscription", `nats: permissions violation: Permissions Violation for Subscription to "kube.>"`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := deniedSubject(tt.text)
			if got != tt.want || ok != tt.ok {
				t.Errorf("deniedSubject: got %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDenialsLeaveAViolationNoPublishWaitsForToTheCaller(t *testing.T) {
	// A denied checkpoint write or stream read (a request the pipeline does not make) must
	// reach the connection's error log, not vanish.
	d := NewDenials()
	w := &flight{}
	d.add("kube.c.core.v1.configmaps.ns.a.added", w)
	defer d.remove("kube.c.core.v1.configmaps.ns.a.added", w)
	err := fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "$KV.relay-checkpoints.c/configmaps"`)
	if d.Observe(err) {
		t.Error("Observe: got true for a violation no publish waits for, want false so that the caller logs it")
	}
}

func TestPipelineCountsADeniedPublishUntilTheClientLetsItGo(t *testing.T) {
	// The server sends no reply to a denied publish, so the client holds its future until the
	// ack times out, in a pending window all sources share (sized by their max outstanding).
	// A pipeline that counted a denied publish as done at once would fill that window with
	// the futures of a denied namespace and stall every other source's publishes.
	// The client also holds the message meanwhile: its charge on the budget is kept.
	synctest.Test(t, func(t *testing.T) {
		d, b := NewDenials(), NewBudget(1<<20)
		r := startPipeline(t, 1, func(p *pipeline) { p.denials, p.budget = d, b })

		itA := change("a", "kube.c.core.v1.configmaps.denied.a.added", "1")
		itA.charged, _ = b.tryChange(1000)
		r.p.in <- itA
		r.p.in <- change("b", "kube.c.core.v1.configmaps.ok.b.added", "2")
		a := r.next(t)
		d.Observe(fmt.Errorf("%w: %s", nats.ErrPermissionViolation, `Permissions Violation for Publish to "kube.c.core.v1.configmaps.denied.a.added"`))
		waitCheckpoint(t, r.ck, "1") // a given up: the checkpoint moves past it
		synctest.Wait()              // and the pipeline waits with nothing left to do
		r.none(t)
		if got := b.Used(); got != 1000 {
			t.Errorf("budget while the client holds a's message: got %d bytes, want 1000", got)
		}
		a.fail(jetstream.ErrAsyncPublishTimeout) // the client lets the future go
		pubB := r.next(t)
		if pubB.msg.Subject != "kube.c.core.v1.configmaps.ok.b.added" {
			t.Fatalf("publish: got %s, want b", pubB.msg.Subject)
		}
		pubB.ack()
		waitCheckpoint(t, r.ck, "2")
		if got := b.Used(); got != 0 {
			t.Errorf("budget once everything is let go: got %d bytes, want 0", got)
		}
	})
}

package relay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// recordingObserver keeps what it is told.
type recordingObserver struct {
	mu    sync.Mutex
	pubs  []Publication
	notes map[Note]int
}

func (o *recordingObserver) Published(p Publication) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pubs = append(o.pubs, p)
}

func (o *recordingObserver) Noted(n Note) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.notes == nil {
		o.notes = map[Note]int{}
	}
	o.notes[n]++
}

func (o *recordingObserver) snapshot() ([]Publication, map[Note]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	notes := map[Note]int{}
	for k, v := range o.notes {
		notes[k] = v
	}
	return append([]Publication(nil), o.pubs...), notes
}

// eventItem is an event change received at received.
func eventItem(key, rv string, t event.Type, origin event.Origin, oversize bool, received time.Time) *item {
	h := nats.Header{}
	h.Set(event.HeaderCEType, event.CETypePrefix+string(t))
	h.Set(event.HeaderOrigin, string(origin))
	if oversize {
		h.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
	}
	return &item{key: key, msg: &nats.Msg{Subject: key, Header: h}, index: &nats.Msg{Subject: "index." + key}, rv: rv,
		received: received}
}

func TestPipelineTellsTheObserver(t *testing.T) {
	r := startPipeline(t, 10)
	obs := &recordingObserver{}
	r.p.obs = obs
	received := r.clock.Now()
	r.p.in <- eventItem("a", "10", event.Added, event.Live, false, received)
	r.p.in <- eventItem("b", "11", event.Deleted, event.Relist, true, received)

	a := r.next(t)
	b := r.next(t)
	a.fail(errors.New("nats: timeout"))
	b.ok <- &jetstream.PubAck{Duplicate: true}
	r.next(t).ack() // b's index record
	waitFor(t, "a's retry timer", r.clock.HasWaiters)
	r.clock.Step(time.Second) // past a's backoff
	a = r.next(t)             // a's retry
	a.ack()
	r.next(t).ack() // a's index record
	waitCheckpoint(t, r.ck, "11")

	pubs, notes := obs.snapshot()
	if len(pubs) != 2 {
		t.Fatalf("publications: got %d, want 2 (one per event, not per index record): %+v", len(pubs), pubs)
	}
	b0, a0 := pubs[0], pubs[1]
	if b0.Type != event.Deleted || b0.Origin != event.Relist || !b0.Oversize || !b0.Duplicate {
		t.Errorf("b: got %+v, want deleted, relist, oversize, duplicate", b0)
	}
	if a0.Type != event.Added || a0.Origin != event.Live || a0.Oversize || a0.Duplicate {
		t.Errorf("a: got %+v, want added, live, neither oversize nor duplicate", a0)
	}
	if a0.Lag != time.Second || a0.RTT != 0 {
		t.Errorf("a: lag %s and round trip %s, want the 1s since its receipt and 0 for the retry acked at once", a0.Lag, a0.RTT)
	}
	if b0.Lag != 0 {
		t.Errorf("b: lag %s, want 0 (acked before the clock moved)", b0.Lag)
	}
	if notes[NotePublishFailed] != 1 || notes[NotePublishRetried] != 1 {
		t.Errorf("notes: got %v, want one failure and one retry", notes)
	}
}

func TestPipelineStalledOnlyWithWorkAndNoProgress(t *testing.T) {
	pub := &fakePublisher{sent: make(chan *fakeFuture, 10)}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := newPipeline(pub, 10, 10, clock, func(string, bool) {}, nil)
	clock.Step(time.Hour) // an idle pipeline is never stalled, however long it waits
	if _, stalled := p.stalled(0); stalled {
		t.Fatal("idle pipeline reported stalled")
	}
	// Not running, with an item buffered: that is work nobody does.
	p.in <- eventItem("a", "1", event.Added, event.Live, false, clock.Now())
	clock.Step(2 * time.Millisecond)
	noProgress := time.Hour + 2*time.Millisecond // since the pipeline was created
	if idle, stalled := p.stalled(time.Millisecond); !stalled || idle != noProgress {
		t.Fatalf("buffered work without progress: got stalled %v after %s, want stalled after %s", stalled, idle, noProgress)
	}
	if _, stalled := p.stalled(noProgress); stalled {
		t.Fatal("stalled at the limit, not past it")
	}

	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, stop) }()
	(<-pub.sent).ack()
	(<-pub.sent).ack()
	waitFor(t, "the pipeline to finish its item", func() bool { return p.held.Load() == 0 && len(p.in) == 0 })
	clock.Step(time.Hour)
	if _, stalled := p.stalled(0); stalled {
		t.Error("pipeline with everything acked reported stalled")
	}
	cancel()
	<-done
	p.in <- eventItem("b", "2", event.Added, event.Live, false, clock.Now())
	clock.Step(time.Hour)
	if _, stalled := p.stalled(0); stalled {
		t.Error("stopped pipeline reported stalled")
	}
}

func TestSuppressedChangesAreNotedByTheirReason(t *testing.T) {
	tests := []struct {
		reason event.FilterReason
		want   Note
	}{
		{event.FilterReasonEventType, NoteFilteredEventType},
		{event.FilterReasonQuiet, NoteFilteredQuiet},
		{event.FilterReasonWhen, NoteFilteredWhen},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			if got := filteredNote(tt.reason); got != tt.want {
				t.Errorf("got note %d, want %d", got, tt.want)
			}
		})
	}
}

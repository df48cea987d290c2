package relay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

func eventItem(key, rv string, t event.Type, origin event.Origin, oversize bool) *item {
	h := nats.Header{}
	h.Set(event.HeaderCEType, event.CETypePrefix+string(t))
	h.Set(event.HeaderOrigin, string(origin))
	if oversize {
		h.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
	}
	return &item{key: key, msg: &nats.Msg{Subject: key, Header: h}, index: &nats.Msg{Subject: "index." + key}, rv: rv,
		received: time.Now().Add(-time.Second)}
}

func TestPipelineTellsTheObserver(t *testing.T) {
	r := startPipeline(t, 10)
	obs := &recordingObserver{}
	r.p.obs = obs
	r.p.in <- eventItem("a", "10", event.Added, event.Live, false)
	r.p.in <- eventItem("b", "11", event.Deleted, event.Relist, true)

	a := r.next(t)
	b := r.next(t)
	a.fail(errors.New("nats: timeout"))
	b.ok <- &jetstream.PubAck{Duplicate: true}
	r.next(t).ack() // b's index record
	a = r.next(t)   // a's retry
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
	if a0.Lag < time.Second {
		t.Errorf("a: lag %s, want at least the 1s since its receipt", a0.Lag)
	}
	if notes[NotePublishFailed] != 1 || notes[NotePublishRetried] != 1 {
		t.Errorf("notes: got %v, want one failure and one retry", notes)
	}
}

func TestPipelineStalledOnlyWithWorkAndNoProgress(t *testing.T) {
	pub := &fakePublisher{sent: make(chan *fakeFuture, 10)}
	p := newPipeline(pub, 10, 10, func(string, bool) {}, nil)
	if _, stalled := p.stalled(0); stalled {
		t.Fatal("idle pipeline reported stalled")
	}
	// Not running, with an item buffered: that is work nobody does.
	p.in <- eventItem("a", "1", event.Added, event.Live, false)
	time.Sleep(2 * time.Millisecond) // let "no progress" exceed the 1ms limit below
	if _, stalled := p.stalled(time.Millisecond); !stalled {
		t.Fatal("buffered work without progress not reported stalled")
	}
	if _, stalled := p.stalled(time.Hour); stalled {
		t.Fatal("stalled before the limit")
	}

	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, stop) }()
	(<-pub.sent).ack()
	(<-pub.sent).ack()
	deadline := time.Now().Add(5 * time.Second)
	for p.held.Load() != 0 || len(p.in) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("pipeline did not finish its item")
		}
		time.Sleep(time.Millisecond)
	}
	if _, stalled := p.stalled(0); stalled {
		t.Error("pipeline with everything acked reported stalled")
	}
	cancel()
	<-done
	p.in <- eventItem("b", "2", event.Added, event.Live, false)
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

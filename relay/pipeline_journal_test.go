package relay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// fakeJournal hands every index record written to the test, which answers it.
type fakeJournal struct {
	written chan journaled
}

type journaled struct {
	rec  *nats.Msg
	done func(error)
}

func (j *fakeJournal) Write(rec *nats.Msg, done func(error)) { j.written <- journaled{rec, done} }
func (j *fakeJournal) Run(ctx context.Context) error         { <-ctx.Done(); return nil }

func (j *fakeJournal) next(t *testing.T) journaled {
	t.Helper()
	select {
	case w := <-j.written:
		return w
	case <-time.After(5 * time.Second):
		t.Fatal("no index record written within 5s")
		return journaled{}
	}
}

func TestPipelineHandsIndexRecordsToTheJournalAndWaitsForThemDurable(t *testing.T) {
	j := &fakeJournal{written: make(chan journaled, 10)}
	r := startPipeline(t, 10, func(p *pipeline) { p.journal = j })
	a1 := change("a", "a1", "1")
	a1.index = &nats.Msg{Subject: "idx.a1"}
	a2 := change("a", "a2", "2")
	a2.index = &nats.Msg{Subject: "idx.a2"}
	b1 := change("b", "b1", "3")
	b1.index = &nats.Msg{Subject: "idx.b1"}
	r.p.in <- a1
	r.p.in <- a2
	r.p.in <- b1

	// Both events go out; each record goes to the journal only after its event's ack, never
	// to the publisher.
	fa1, fb1 := r.next(t), r.next(t)
	if fa1.msg.Subject != "a1" || fb1.msg.Subject != "b1" {
		t.Fatalf("first publishes: got %s, %s, want a1, b1", fa1.msg.Subject, fb1.msg.Subject)
	}
	fb1.ack()
	wb1 := j.next(t)
	if wb1.rec.Subject != "idx.b1" {
		t.Fatalf("journal: got %s, want idx.b1", wb1.rec.Subject)
	}
	fa1.ack()
	wa1 := j.next(t)
	if wa1.rec.Subject != "idx.a1" {
		t.Fatalf("journal: got %s, want idx.a1", wa1.rec.Subject)
	}
	// The object's next change waits for its record to be durable; a failed write is
	// written again (after the retry backoff) before it goes on.
	r.none(t)
	wa1.done(errors.New("nats: timeout"))
	waitFor(t, "the retry's timer", r.clock.HasWaiters)
	r.clock.Step(retryBackoffMax)
	wa1 = j.next(t)
	if wa1.rec.Subject != "idx.a1" {
		t.Fatalf("journal after a failed write: got %s, want idx.a1 again", wa1.rec.Subject)
	}
	r.none(t)
	if got := r.ck.last(); got != "" {
		t.Fatalf("checkpoint before any record is durable: got %q, want none", got)
	}
	wa1.done(nil)
	fa2 := r.next(t)
	if fa2.msg.Subject != "a2" {
		t.Fatalf("after a1's record: got %s, want a2", fa2.msg.Subject)
	}
	fa2.ack()
	j.next(t).done(nil)
	// b1's record is still not durable: the checkpoint stops before it.
	waitFor(t, "the checkpoint at a2", func() bool { return r.ck.last() == "2" })
	r.probe(t)
	if got := r.ck.last(); got != "2" {
		t.Fatalf("checkpoint: got %q, want 2 (b1's record not durable)", got)
	}
	wb1.done(nil)
	waitFor(t, "the checkpoint past b1", func() bool { return r.ck.last() != "2" })
}

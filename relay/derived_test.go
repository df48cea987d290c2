package relay

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// publishesInOrder acks the pipeline's next publishes, requiring their subjects to be want.
func (r *pipelineRun) publishesInOrder(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		f := r.next(t)
		if f.msg.Subject != w {
			t.Fatalf("publish: got %s, want %s", f.msg.Subject, w)
		}
		if r.ck.last() != "" {
			t.Fatalf("checkpoint %q before every step was acked", r.ck.last())
		}
		f.ack()
	}
}

func TestPipelinePublishesDerivedEventsBetweenTheEventAndTheIndexRecord(t *testing.T) {
	r := startPipeline(t, 10)
	it := change("a", "a1", "1")
	it.derived = []*nats.Msg{{Subject: "a1.derived.ready"}, {Subject: "a1.derived.other"}}
	it.index = &nats.Msg{Subject: "idx.a1"}
	next := change("a", "a2", "2")
	r.p.in <- it
	r.p.in <- next
	r.publishesInOrder(t, "a1", "a1.derived.ready", "a1.derived.other", "idx.a1")
	waitCheckpoint(t, r.ck, "1")
	if f := r.next(t); f.msg.Subject != "a2" {
		t.Fatalf("then: got %s, want a2", f.msg.Subject)
	}
}

func TestPipelinePublishesTheDerivedEventsOfAFilteredChange(t *testing.T) {
	r := startPipeline(t, 10)
	it := &item{key: "a", rv: "1", derived: []*nats.Msg{{Subject: "a1.derived.ready"}}, index: &nats.Msg{Subject: "idx.a1"}}
	if got := it.currentStep(); got != StepDerived {
		t.Fatalf("first step of a filtered change: got %q, want %q", got, StepDerived)
	}
	r.p.in <- it
	r.publishesInOrder(t, "a1.derived.ready", "idx.a1")
	waitCheckpoint(t, r.ck, "1")
}

func TestPipelineSendsADerivedEventRefusedAsTooLargeAsItsReference(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	it := change("a", "a1", "1")
	body := &nats.Msg{Subject: "a1.derived.ready", Header: nats.Header{}, Data: []byte(`{"big":true}`)}
	it.derived = []*nats.Msg{body, {Subject: "a1.derived.other"}}
	it.index = &nats.Msg{Subject: "idx.a1"}
	r.p.in <- it
	r.publishesInOrder(t, "a1")
	r.next(t).fail(apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"))
	if got := nextRefusal(t, refusals); got != (refusedStep{subject: "a1.derived.ready", step: StepDerived, why: RefusedTooLarge, reference: true}) {
		t.Fatalf("refusal: got %+v, want the derived event sent again as its reference", got)
	}
	ref := r.next(t)
	if ref.msg.Subject != "a1.derived.ready" || len(ref.msg.Data) != 0 || ref.msg.Header.Get(event.HeaderBodyOmitted) != event.BodyOmittedStreamLimit {
		t.Fatalf("reference: got %s with %d bytes and body-omitted %q", ref.msg.Subject, len(ref.msg.Data), ref.msg.Header.Get(event.HeaderBodyOmitted))
	}
	ref.ack()
	r.publishesInOrder(t, "a1.derived.other", "idx.a1")
	waitCheckpoint(t, r.ck, "1")
}

func TestPipelineGivesUpARefusedDerivedEventAndStillWritesTheIndexRecord(t *testing.T) {
	r, refusals := startRefusingPipeline(t, 10)
	it := change("a", "a1", "1")
	it.derived = []*nats.Msg{{Subject: "a1.derived.ready"}, {Subject: "a1.derived.other"}}
	it.index = &nats.Msg{Subject: "idx.a1"}
	r.p.in <- it
	r.publishesInOrder(t, "a1")
	// Too large without a body: nothing to reduce.
	r.next(t).fail(apiError(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"))
	if got := nextRefusal(t, refusals); got != (refusedStep{subject: "a1.derived.ready", step: StepDerived, why: RefusedTooLarge}) {
		t.Fatalf("refusal: got %+v, want the derived event given up", got)
	}
	r.publishesInOrder(t, "a1.derived.other", "idx.a1")
	waitCheckpoint(t, r.ck, "1")
}

func TestCoveredTellsAHandledChangeFromANewOne(t *testing.T) {
	ours := event.Meta{Cluster: "c", Version: "v1", Resource: "pods", Kind: "Pod", Namespace: "ns", Name: "p",
		UID: "u1", ResourceVersion: "20", Type: event.Modified, Origin: event.Live, Derived: "ready"}
	at := func(uid, rv string, history uint64) event.Meta {
		m := ours
		m.UID, m.ResourceVersion, m.History = uid, rv, history
		return m
	}
	tests := []struct {
		name string
		last event.Meta
		want bool
	}{
		{"the same change", at("u1", "20", 0), true},
		{"a later change of the object", at("u1", "25", 0), true},
		{"a later change of a re-created object", at("u2", "30", 0), true},
		{"an earlier change of the object", at("u1", "10", 0), false},
		{"another object at the same resourceVersion", at("u2", "20", 0), false},
		{"a change of another history epoch", at("u1", "25", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := covered(tt.last.Header(), ours); got != tt.want {
				t.Errorf("covered: got %v, want %v", got, tt.want)
			}
		})
	}
}

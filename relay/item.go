package relay

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Step names a step of an item: the state mirror's record, the event, a derived event, the
// index record.
type Step string

// The steps, in the order they are published.
const (
	StepMirror  Step = "mirror"
	StepEvent   Step = "event"
	StepDerived Step = "derived"
	StepIndex   Step = "index"
)

// Steps lists every Step, for metrics that create their series up front.
var Steps = []Step{StepMirror, StepEvent, StepDerived, StepIndex}

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
	// derived are the change's derived events, published in order after msg (which is nil
	// when the change's own event is filtered) and before index.
	derived []*nats.Msg
	// index, when set, records the change in the durable object index; it is published after
	// msg and derived are acked. The item is done only when every step is acked.
	index *nats.Msg
	// refusedIndex, when set, replaces index if NATS refuses the event for good: it records
	// the state conditions the derived events went out for without the refused change (see
	// intake.refusedRecord).
	refusedIndex *nats.Msg
	// step counts the steps (mirror, msg, derived, index) acked or given up so far.
	step int
	// mirrorReduced is set once the mirror record was replaced by the object's identity
	// after the bucket refused the state as too large.
	mirrorReduced bool
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
	// retired, when set (a mark with no rv), is closed once the item and every earlier one are
	// done and their checkpoint reported (see beginHistory).
	retired chan struct{}
}

// current returns the message of the step in progress: mirror, event, derived events,
// index (skipping the ones not set), or nil when every step is done.
func (it *item) current() *nats.Msg {
	m, _ := it.at(it.step)
	return m
}

// at returns the message of step n (counting only the steps set) and names its step.
func (it *item) at(n int) (*nats.Msg, Step) {
	for _, s := range [...]struct {
		m    *nats.Msg
		step Step
	}{{it.mirror, StepMirror}, {it.msg, StepEvent}} {
		if s.m == nil {
			continue
		}
		if n == 0 {
			return s.m, s.step
		}
		n--
	}
	if n < len(it.derived) {
		return it.derived[n], StepDerived
	}
	if n -= len(it.derived); n == 0 && it.index != nil {
		return it.index, StepIndex
	}
	return nil, ""
}

// currentStep names the step in progress; "" when every step is done.
func (it *item) currentStep() Step {
	_, step := it.at(it.step)
	return step
}

package relay

import (
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// ackSink is where the publishes of one pipeline run report: results takes the outcome of
// each publish, released the item of a denied publish once the client lets it go, and exit
// is closed when the run returns (nothing reads them after).
type ackSink struct {
	results  chan<- result
	released chan<- *item
	exit     <-chan struct{}
}

// Flight states: waiting for the outcome, reported (acknowledged or failed), denied.
const (
	flightWaiting uint32 = iota
	flightReported
	flightDenied
)

// flight is one publish of an item's step, waiting for its acknowledgement and for a
// permissions violation (Denials), whichever comes first: the first is its result. A
// denied publish stays held by the client until its acknowledgement times out, and is
// released then.
type flight struct {
	it      *item
	sink    *ackSink
	denials *Denials
	subject string
	state   atomic.Uint32
	// unsent is set, by the pipeline's goroutine, when the publish failed before it was
	// sent: a denial that came first leaves no message for the client to let go.
	unsent bool
}

// Acked implements AckHandler.
func (f *flight) Acked(ack *jetstream.PubAck, err error) {
	f.denials.remove(f.subject, f)
	if f.state.CompareAndSwap(flightWaiting, flightReported) {
		f.report(result{it: f.it, ack: ack, err: err})
		return
	}
	// Denied first: the client has let the publish go.
	select {
	case f.sink.released <- f.it:
	case <-f.sink.exit:
	}
}

// denied implements denialWaiter.
func (f *flight) denied(err error) {
	if f.state.CompareAndSwap(flightWaiting, flightDenied) {
		f.report(result{it: f.it, err: err, f: f})
	}
}

func (f *flight) report(r result) {
	select {
	case f.sink.results <- r:
	case <-f.sink.exit:
	}
}

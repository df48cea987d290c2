package relay

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// ErrPublishDenied is the error of a publish the server refused with a permissions violation.
var ErrPublishDenied = errors.New("permissions violation")

// denialPrefix starts the text of the server's -ERR for a publish the user may not make; the
// quoted subject follows (nats-server's pubPermissionViolation).
const denialPrefix = "Permissions Violation for Publish to "

// Denials ties the server's permissions violations, which reach the client only as
// asynchronous errors on the connection, to the publishes waiting for their ack. The server
// drops a denied message and sends no JetStream reply, so without it a denied publish would
// only time out and be retried as transient.
//
// Connect Observe to the connection's error handler and give the Denials to every source
// (SourceDeps.Denials). A zero Denials is ready to use.
type Denials struct {
	mu sync.Mutex
	// waiting holds, per subject, the publishes in flight to it.
	waiting map[string][]denialWaiter
}

// denialWaiter is a publish in flight, told when the server refuses it. It may be told after
// it was removed (Observe calls it without holding the lock), and must not block.
type denialWaiter interface {
	denied(err error)
}

// NewDenials returns an empty Denials.
func NewDenials() *Denials { return &Denials{} }

// Observe reads an asynchronous connection error; for a permissions violation on a publish
// it fails every publish in flight to that subject with ErrPublishDenied and returns true.
// Other errors, and a violation no publish waits for (a checkpoint write, a read of the
// stream), are left alone (false): the caller logs them.
func (d *Denials) Observe(err error) bool {
	if d == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	subject, ok := deniedSubject(err.Error())
	if !ok {
		return false
	}
	denied := fmt.Errorf("%w for publish to %q", ErrPublishDenied, subject)
	d.mu.Lock()
	waiting := slices.Clone(d.waiting[subject])
	d.mu.Unlock()
	for _, w := range waiting {
		w.denied(denied)
	}
	return len(waiting) > 0
}

// deniedSubject extracts the subject from the text of a publish permissions violation.
func deniedSubject(text string) (string, bool) {
	i := strings.Index(strings.ToLower(text), strings.ToLower(denialPrefix))
	if i < 0 {
		return "", false
	}
	subject, err := strconv.Unquote(strings.TrimSpace(text[i+len(denialPrefix):]))
	if err != nil {
		return "", false
	}
	return subject, true
}

// add registers w, a publish to subject about to be sent, to be told if the server refuses
// it; remove it once the publish has its outcome. A nil Denials never reports.
func (d *Denials) add(subject string, w denialWaiter) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == nil {
		d.waiting = make(map[string][]denialWaiter)
	}
	d.waiting[subject] = append(d.waiting[subject], w)
}

// remove unregisters w from subject.
func (d *Denials) remove(subject string, w denialWaiter) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.waiting[subject]
	for i := range ws {
		if ws[i] == w {
			ws = slices.Delete(ws, i, i+1)
			break
		}
	}
	if len(ws) == 0 {
		delete(d.waiting, subject)
		return
	}
	d.waiting[subject] = ws
}

// Watch registers a publish to subject made outside a source's pipeline (an index journal's
// segment): the channel receives ErrPublishDenied if the server refuses it. Call cancel once
// the publish has its outcome. A nil Denials never reports.
func (d *Denials) Watch(subject string) (denied <-chan error, cancel func()) {
	if d == nil {
		return nil, func() {}
	}
	w := chanWaiter(make(chan error, 1))
	d.add(subject, w)
	return w, func() { d.remove(subject, w) }
}

// chanWaiter is a denialWaiter that receives the refusal on a channel (the first only).
type chanWaiter chan error

func (w chanWaiter) denied(err error) {
	select {
	case w <- err:
	default:
	}
}

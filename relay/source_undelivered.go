package relay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// undeliveredReadyWindow is how long a source reports not ready after a change it could not
// deliver. No retry or restart can deliver that change, so the report clears by itself; the
// window is long enough for a readiness probe, `kubectl get pods` or an alert on readiness
// to show it, and the undeliverable counter is the lasting record.
const undeliveredReadyWindow = 10 * time.Minute

// undeliveredLog remembers the changes a source gave up on, for its status.
type undeliveredLog struct {
	mu    sync.Mutex
	count int
	at    time.Time
	last  string
}

func (u *undeliveredLog) add(desc string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.count++
	u.at, u.last = at, desc
}

// reason returns why the source is not ready, "" when its last undeliverable change is
// older than the window (or there was none).
func (u *undeliveredLog) reason(now time.Time) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.count == 0 || now.Sub(u.at) > undeliveredReadyWindow {
		return ""
	}
	return fmt.Sprintf("%d changes undeliverable since start, the last at %s: %s", u.count, u.at.UTC().Format(time.RFC3339), u.last)
}

// statusValueMax bounds an object key or subject quoted in a status reason: /readyz is read
// by people and probes, and a name may run to hundreds of KiB. The log line has it whole.
const statusValueMax = 256

// statusValue quotes v for a status reason, on one line, cut to statusValueMax bytes with
// the full length noted.
func statusValue(v string) string {
	if len(v) <= statusValueMax {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(strings.ToValidUTF8(v[:statusValueMax], "")), len(v))
}

// onRefused returns the pipeline's handler of refused steps: it logs each, and records the
// ones given up for the source's status.
func (s *Source) onRefused(log zerolog.Logger) func(it *item, step Step, why Refusal, err error, reference bool) {
	// lastSegment is the index segment last reported refused: its records share one error
	// (the pipeline's goroutine is the only caller).
	var lastSegment string
	return func(it *item, step Step, why Refusal, err error, reference bool) {
		uid, rv := it.identity()
		subject := it.current().Subject
		var seg segmentError
		if step == StepIndex && errors.As(err, &seg) {
			segSubject, records := seg.Segment()
			if segSubject == lastSegment {
				return
			}
			lastSegment = segSubject
			log.Error().Err(err).Str("subject", segSubject).Int("records", records).Str("reason", string(why)).
				Msg("index segment refused, its records given up: the changes were published, a relist after a restart may offer them again")
			s.undelivered.add(fmt.Sprintf("index segment %s of %d records refused (%s): %v", statusValue(segSubject), records, why, err), time.Now())
			return
		}
		switch {
		case reference && step == StepMirror:
			log.Warn().Err(err).Str("key", it.key).Str("uid", uid).Str("rv", rv).Str("subject", subject).
				Str("reason", string(why)).Msg("state mirror refused the object, recording its identity only")
			return
		case reference:
			log.Warn().Err(err).Str("key", it.key).Str("uid", uid).Str("rv", rv).Str("subject", subject).
				Str("reason", string(why)).Msg("event refused with its body, publishing a reference without body")
			return
		}
		log.Error().Err(err).Str("key", it.key).Str("uid", uid).Str("rv", rv).Str("subject", subject).
			Str("step", string(step)).Str("reason", string(why)).Msg("change undeliverable, moving on")
		s.undelivered.add(fmt.Sprintf("%s (uid %s, rv %s) on %s: %s refused (%s): %v",
			statusValue(it.key), uid, rv, statusValue(subject), step, why, err), time.Now())
	}
}

// segmentError is an index journal's error shared by the records of one segment.
type segmentError interface {
	error
	Segment() (subject string, records int)
}

// identity returns the uid and resourceVersion of the item's change, as far as its messages
// tell: the event's headers, or the index record ("<uid> <rv>").
func (it *item) identity() (uid, rv string) {
	if it.msg != nil && it.msg.Header != nil {
		return it.msg.Header.Get(event.HeaderUID), it.msg.Header.Get(event.HeaderResourceVersion)
	}
	if it.index != nil {
		if u, r, ok := strings.Cut(string(it.index.Data), " "); ok {
			return u, r
		}
	}
	return "", ""
}

package relay

import (
	"math"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// backoff is how long to wait before each retry of something that keeps failing: doubling
// from a first wait to a cap, stepped by client-go's wait.Backoff. Callers count the failures
// and start again from the first wait after a success.
type backoff struct {
	steps wait.Backoff
	// jitter takes up to this fraction off each wait, so that the sources of a relay do not
	// retry in lock step after a shared outage; taken off rather than added (as wait.Backoff
	// does), the cap stays the longest wait.
	jitter float64
}

// doubling returns the backoff that waits first, then twice as long after each failure, up
// to limit, less up to jitter of each wait.
func doubling(first, limit time.Duration, jitter float64) backoff {
	return backoff{steps: wait.Backoff{Duration: first, Factor: 2, Cap: limit, Steps: math.MaxInt32}, jitter: jitter}
}

var (
	// watchRetry is the wait before re-opening a watch or a list after an error (apiserver
	// down, network fault), with a quarter of jitter: many sources retry after one outage.
	watchRetry = doubling(watchBackoffMin, watchBackoffMax, 0.25)
	// refusedRetry is the wait before retrying a resource the server refuses (forbidden, not
	// found): growing from watchBackoffMax to permanentBackoffMax.
	refusedRetry = doubling(watchBackoffMax, permanentBackoffMax, 0)
	// publishRetry is the wait before a failed publish is tried again.
	publishRetry = doubling(retryBackoffMin, retryBackoffMax, 0)
)

// delay returns the wait after the failures-th failure in a row (1 for the first).
func (b backoff) delay(failures int) time.Duration {
	steps := b.steps // a copy: Step advances it
	d := steps.Step()
	for i := 1; i < failures; i++ {
		if steps.Steps == 0 {
			d = steps.Duration // capped: every later wait is the cap
			break
		}
		d = steps.Step()
	}
	if b.jitter > 0 {
		d -= time.Duration(rand.Int64N(int64(float64(d)*b.jitter) + 1))
	}
	return d
}

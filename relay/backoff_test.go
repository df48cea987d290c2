package relay

import (
	"testing"
	"time"
)

func TestBackoffDoublesFromItsFirstWaitToItsCap(t *testing.T) {
	tests := []struct {
		name     string
		b        backoff
		failures int
		want     time.Duration
	}{
		{"publish: first", publishRetry, 1, retryBackoffMin},
		{"publish: second", publishRetry, 2, 2 * retryBackoffMin},
		{"publish: third", publishRetry, 3, 4 * retryBackoffMin},
		{"publish: last below the cap", publishRetry, 6, 32 * retryBackoffMin},
		{"publish: capped", publishRetry, 7, retryBackoffMax},
		{"publish: stays capped", publishRetry, 100, retryBackoffMax},
		{"refused: starts where watch retries end", refusedRetry, 1, watchBackoffMax},
		{"refused: second", refusedRetry, 2, 2 * watchBackoffMax},
		{"refused: capped", refusedRetry, 5, permanentBackoffMax},
		{"refused: stays capped", refusedRetry, 1000, permanentBackoffMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.delay(tt.failures); got != tt.want {
				t.Errorf("delay(%d): got %s, want %s", tt.failures, got, tt.want)
			}
		})
	}
}

func TestWatchRetryJitterTakesOffUpToAQuarter(t *testing.T) {
	tests := []struct {
		failures int
		base     time.Duration
	}{
		{1, watchBackoffMin}, {2, 2 * watchBackoffMin}, {8, 128 * watchBackoffMin}, {9, watchBackoffMax}, {50, watchBackoffMax},
	}
	for _, tt := range tests {
		lowest := tt.base
		for range 200 {
			d := watchRetry.delay(tt.failures)
			if d > tt.base || d < tt.base-tt.base/4 {
				t.Fatalf("delay(%d): got %s, want within [%s, %s]", tt.failures, d, tt.base-tt.base/4, tt.base)
			}
			lowest = min(lowest, d)
		}
		if lowest == tt.base {
			t.Errorf("delay(%d): 200 waits all %s: no jitter", tt.failures, tt.base)
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
)

func TestSetupRetriesOnlyWhatTheClusterClearsOnItsOwn(t *testing.T) {
	api := func(code jetstream.ErrorCode, desc string) error {
		return fmt.Errorf("open checkpoint bucket b: %w", &jetstream.APIError{Code: 400, ErrorCode: code, Description: desc})
	}
	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"a peer offline", api(codeNoPeers, "no suitable peers for placement, peer offline"), true},
		{"no meta leader yet", api(codeClusterNotAvailable, "JetStream system temporarily unavailable"), true},
		{"a request timed out", fmt.Errorf("stream K: %w", nats.ErrTimeout), true},
		{"a context deadline of the request", fmt.Errorf("stream K: %w", context.DeadlineExceeded), true},
		{"replicas on a single server", api(10074, "replicas > 1 not supported in non-clustered mode"), false},
		{"a denied subject", fmt.Errorf("stream K: %w", nats.ErrPermissionViolation), false},
		{"an unusable bucket", fmt.Errorf("%w: bucket b has no TTL", checkpoint.ErrBucketUnusable), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := setupTransient(tc.err); got != tc.transient {
				t.Errorf("setupTransient(%v) = %v, want %v", tc.err, got, tc.transient)
			}
		})
	}
}

func TestSetupRetryStopsAtTheFirstLastingFailureOrSuccess(t *testing.T) {
	offline := &jetstream.APIError{Code: 400, ErrorCode: codeNoPeers, Description: "no suitable peers for placement, peer offline"}
	var logs strings.Builder
	log := zerolog.New(&logs)
	calls := 0
	err := setupRetry(context.Background(), log, "bucket b", func() error {
		calls++
		if calls < 3 {
			return offline
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("setupRetry after two transient failures: %v after %d calls, want nil after 3", err, calls)
	}
	if n := strings.Count(logs.String(), `"step":"bucket b"`); n != 2 {
		t.Errorf("logged %d retries naming the step, want 2:\n%s", n, logs.String())
	}

	calls = 0
	lasting := errors.New("bucket exists with other settings")
	if err := setupRetry(context.Background(), log, "bucket b", func() error { calls++; return lasting }); !errors.Is(err, lasting) || calls != 1 {
		t.Errorf("setupRetry on a lasting failure: %v after %d calls, want it at once", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = setupRetry(ctx, log, "bucket b", func() error { calls++; cancel(); return offline })
	if !errors.Is(err, offline) || calls != 1 {
		t.Errorf("setupRetry when stopped: %v after %d calls, want the last failure at once", err, calls)
	}
}

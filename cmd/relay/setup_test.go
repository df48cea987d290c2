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
	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
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

func TestSetupFailedIsCleanWhenStoppedAndNamesAnUnusableBucket(t *testing.T) {
	failed := errors.New("stream K: nats: timeout")
	stopped, stop := context.WithCancelCause(context.Background())
	stop(nil)
	if err := setupFailed(stopped, failed, "RELAY_STREAM", "K"); err != nil {
		t.Errorf("asked to stop during the wait: %v, want a clean exit (nil)", err)
	}
	closed, closeNATS := context.WithCancelCause(context.Background())
	closeNATS(natsconn.ErrClosed)
	if err := setupFailed(closed, failed, "RELAY_STREAM", "K"); !errors.Is(err, natsconn.ErrClosed) {
		t.Errorf("NATS closed for good during the wait: %v, want %v", err, natsconn.ErrClosed)
	}
	unusable := fmt.Errorf("%w: bucket b has no TTL", checkpoint.ErrBucketUnusable)
	var cfgErr *ConfigError
	if err := setupFailed(context.Background(), unusable, "RELAY_INDEX_BUCKET", "b"); !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), "RELAY_INDEX_BUCKET") {
		t.Errorf("an unusable bucket: %v, want a configuration error naming RELAY_INDEX_BUCKET", err)
	}
	if err := setupFailed(context.Background(), failed, "RELAY_STREAM", "K"); !errors.Is(err, failed) {
		t.Errorf("another failure: %v, want it unchanged", err)
	}
}

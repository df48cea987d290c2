package main

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"
)

// JetStream answers that pass while a cluster settles (nats-server's error identifiers).
const (
	// codeNoPeers is "no suitable peers for placement": a replica's peer is offline, still
	// joining, or short of storage; the answer changes as the cluster does.
	codeNoPeers jetstream.ErrorCode = 10005
	// codeClusterNotAvailable is "JetStream system temporarily unavailable": no meta leader yet.
	codeClusterNotAvailable jetstream.ErrorCode = 10008
)

// Setup retries start at setupRetryFirst and double up to setupRetryMax: quick while a
// cluster forms, a request every 30 s while a peer stays down.
const (
	setupRetryFirst = 500 * time.Millisecond
	setupRetryMax   = 30 * time.Second
)

// setupTransient reports whether creating or opening the stream or a bucket failed for a
// reason the cluster clears on its own: a peer offline or a meta leader not yet elected (as
// after a node restart, or under load), or a JetStream API request that timed out. Anything
// else (a refused configuration, a denied subject, a bucket that exists with other settings)
// stays as it is until someone acts, so the relay exits and says so.
func setupTransient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == codeNoPeers || apiErr.ErrorCode == codeClusterNotAvailable
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// setupRetry runs step (creating or opening the stream or a bucket, named by what) until it
// succeeds, fails for good, or ctx ends. A transient failure is logged at WARN with the
// next attempt's delay: the relay waits for the JetStream cluster as it waits for NATS
// itself, instead of exiting into a restart loop that would hide why it cannot start.
func setupRetry(ctx context.Context, log zerolog.Logger, what string, step func() error) error {
	backoff := wait.Backoff{Duration: setupRetryFirst, Factor: 2, Cap: setupRetryMax, Steps: math.MaxInt32}
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || !setupTransient(err) || ctx.Err() != nil {
			return err
		}
		delay := backoff.Step()
		log.Warn().Err(err).Str("step", what).Int("attempt", attempt).Dur("retry_in", delay).
			Msg("jetstream not ready for the relay's stream or buckets; retrying")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

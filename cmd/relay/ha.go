package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-nats-relay/kube-nats-relay/internal/leader"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// wedgedAfter is how long a source's publishing may hold work without acting on it before
// /healthz fails. A running pipeline acts at least every publishAsyncTimeout plus a retry
// backoff (about 15s) while it has work, NATS down or not; 2 minutes is far beyond that, and
// short enough that a deadlock is restarted within minutes.
const wedgedAfter = 2 * time.Minute

// hardStopGrace bounds the wait for the sources to return after a hard stop: publishing is
// already impossible (NATS is closed), this only lets them log their end.
const hardStopGrace = time.Second

// errCheckpointConflict ends the run of a leader that found its checkpoint written by
// another process (a late write of the previous leader, or a second relay on the same
// buckets): it stops at once and restarts to load the checkpoint afresh. It is the cause of
// the leader.FencedError the run ends with.
var errCheckpointConflict = errors.New("checkpoint or object index written by another relay while leading (a second relay on the same buckets, or a late write of a stopped leader or process): stopped publishing at once; restart to reload it")

// relayOrStandBy relays until ctx ends: at once without leader election, otherwise while
// this process holds the lease (see leader.Elector.Run). It sets what /readyz and /healthz
// check.
//
// /healthz fails only when something is stuck, never because NATS or the apiserver is down
// (a restart would not bring them back, and every replica would restart-loop through an
// outage): a source's publishing holds work without acting on it for wedgedAfter, or this
// process leads but has not renewed its lease long after it should have stopped.
//
// /readyz is ready when NATS is connected and either this process relays and every resource
// is watching, or it stands by and can campaign (it reads the Lease).
func relayOrStandBy(ctx context.Context, cfg Config, rc *rest.Config, conn *natsconn.Conn, rl *relay.Relay,
	ckpts *trackedCheckpoints, ready, live *readiness, m *metrics) error {
	nc := conn.NATS()
	natsReady := func() []string {
		if !nc.IsConnected() {
			return []string{"nats: " + nc.Status().String()}
		}
		return nil
	}
	wedged := func() []string { return rl.Wedged(wedgedAfter) }
	if !cfg.LeaderElect.Bool {
		ready.set(natsReady, rl.NotReady)
		live.set(wedged)
		m.leader.Set(1)
		defer m.leader.Set(0)
		return relayAlone(ctx, conn, rl, ckpts)
	}

	l, err := newElector(cfg, rc)
	if err != nil {
		return err
	}
	ckpts.onConflict = func(err error) {
		if l.Fence(errCheckpointConflict) {
			zerolog.Ctx(ctx).Error().Err(err).Str("lease", l.Lease()).Str("identity", l.Identity()).
				Msg("checkpoint or object index written by another relay while leading: stopping at once")
		}
	}
	ready.setRole(l.Role)
	ready.set(natsReady, func() []string {
		if l.IsLeader() {
			return rl.NotReady()
		}
		return l.StandbyNotReady()
	})
	live.set(l.Wedged, wedged)
	abort := func() {
		conn.Abort()
		m.leader.Set(0)
	}
	return l.Run(ctx, func(ctx context.Context) error {
		m.leader.Set(1)
		defer m.leader.Set(0)
		return rl.Run(ctx)
	}, abort)
}

// newElector prepares the campaign for cfg's Lease; nothing talks to the apiserver yet.
func newElector(cfg Config, rc *rest.Config) (*leader.Elector, error) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	return leader.New(cfg.leaderConfig(), leader.Deps{Leases: cs.CoordinationV1()})
}

// errSecondWriter ends the run of a relay without leader election that found a checkpoint
// written by another process: two relays run on the same buckets (two pods overlapping during
// an eviction or a rollout, even with the Recreate strategy). It exits non-zero so that
// Kubernetes restarts it and the operator sees it, instead of leaving that resource stopped
// while /healthz stays green.
var errSecondWriter = errors.New("checkpoint or object index written by another relay (no leader election): another relay runs on the same buckets, or a stopped one wrote late; stopped publishing at once. Run one replica, or enable RELAY_LEADER_ELECT")

// relayAlone relays without leader election until ctx ends. A checkpoint conflict stops the
// whole process at once: publishing stops (the NATS connection is closed, as a leader does on
// a conflict), and the run ends with errSecondWriter wrapping the conflict, which names the
// checkpoint and the other writer.
func relayAlone(ctx context.Context, conn *natsconn.Conn, rl *relay.Relay, ckpts *trackedCheckpoints) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	conflicted := make(chan struct{})
	var once sync.Once
	ckpts.onConflict = func(err error) {
		once.Do(func() {
			zerolog.Ctx(ctx).Error().Err(err).Msg("checkpoint or object index written by another relay: another relay runs on the same buckets without leader election; stopping at once")
			conn.Abort()
			stop(fmt.Errorf("%w: %w", errSecondWriter, err))
			close(conflicted)
		})
	}
	done := make(chan error, 1)
	go func() { done <- rl.Run(runCtx) }()
	select {
	case err := <-done:
		if cause := context.Cause(runCtx); errors.Is(cause, errSecondWriter) {
			return cause
		}
		return err
	case <-conflicted:
		// Nothing can be published any more: let the sources log their end, then exit.
		select {
		case <-done:
		case <-time.After(hardStopGrace):
		}
		return context.Cause(runCtx)
	}
}

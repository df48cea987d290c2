package main

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// wedgedAfter is how long a source's publishing may hold work without acting on it before
// /healthz fails. A running pipeline acts at least every publishAsyncTimeout plus a retry
// backoff (about 15s) while it has work, NATS down or not; 2 minutes is far beyond that, and
// short enough that a deadlock is restarted within minutes.
const wedgedAfter = 2 * time.Minute

// relayOrStandBy relays until ctx ends: at once without leader election, otherwise while
// this process holds the lease (see leadership.campaign). It sets what /readyz and /healthz
// check.
//
// /healthz fails only when something is stuck, never because NATS or the apiserver is down
// (a restart would not bring them back, and every replica would restart-loop through an
// outage): a source's publishing holds work without acting on it for wedgedAfter, or this
// process leads but has not renewed its lease long after it should have stopped.
//
// /readyz is ready when NATS is connected and either this process relays and every resource
// is watching, or it stands by and can campaign (it reads the Lease).
func relayOrStandBy(ctx context.Context, cfg Config, rc *rest.Config, conn *natsConn, rl *relay.Relay,
	ckpts *trackedCheckpoints, ready, live *readiness, m *metrics) error {
	nc := conn.nc
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
		return rl.Run(ctx)
	}

	l, err := newLeadership(cfg, rc)
	if err != nil {
		return err
	}
	ckpts.onConflict = l.conflict
	ready.setRole(l.role)
	ready.set(natsReady, func() []string {
		if l.isLeader() {
			return rl.NotReady()
		}
		return l.standbyNotReady()
	})
	live.set(l.wedged, wedged)
	abort := func() {
		conn.abort()
		m.leader.Set(0)
	}
	return l.campaign(ctx, abort, func(ctx context.Context) error {
		m.leader.Set(1)
		defer m.leader.Set(0)
		return rl.Run(ctx)
	})
}

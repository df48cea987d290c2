// Package leader elects one active relay among replicas with a coordination.k8s.io Lease,
// and stops the leader before another can start.
//
// It takes a small Config (the Lease, this process's identity, three durations) and the
// Lease client; it never reads the environment. Identity and namespace are resolved once, by
// New. Elector.Run campaigns, runs lead while this process holds the lease, and returns a
// typed error for each way leading can end badly:
//
//   - ErrLeaseLost: the leader could not renew the lease in time, or found it taken. abort
//     was called the moment that was known, before anything else, and lead's context ended.
//   - ErrFenced (a *FencedError): the caller called Fence while leading, because it saw
//     another writer where only the leader may write. abort was called at once too.
//
// Why a leader that loses its lease cannot overlap with the next one: the leader renews the
// Lease every RetryPeriod. When its last successful renewal was sent more than RenewDeadline
// + RetryPeriod ago (12s with the defaults), it gives up: it calls abort, which must make
// further side effects impossible at once (the relay closes its NATS connection without
// draining and resets the socket), then Run returns. A standby may take the lease only when
// LeaseDuration (15s) has passed since it saw the last renewal on the apiserver, by its own
// clock, so the old leader has LeaseDuration - RenewDeadline - RetryPeriod (3s) to stop.
// Config.Validate insists on RenewDeadline + RetryPeriod < LeaseDuration.
//
// A graceful stop (ctx ends) is the other way round: lead returns while this process still
// holds and renews the lease, and only then is the lease released (holder cleared), so that
// the next leader starts where this one stopped.
//
// The election follows client-go's LeaderElector (the same Lease record, the same rules for
// acquiring, renewing and taking over an expired lease, retries spread by the same jitter)
// but runs on an injected clock (k8s.io/utils/clock), so that its deadlines are tested with
// a fake one. client-go's elector reads the wall clock and cannot be given another.
//
// What it does not do: it does not guarantee that nothing the old leader sent before it
// stopped arrives after a new leader started (a delayed write in the network); Fence is how
// the caller stops a leader that sees such a write.
package leader

package e2e

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// heartbeatsPerNode is how many heartbeats of each kind the heartbeat test waits for per
// node: more than one, so that the churn is shown to go on, not a one-off update.
const heartbeatsPerNode = 2

// recordHeartbeats starts a relay for Nodes and the nodes' Leases (namespace
// kube-node-lease), with extra added to its configuration, and returns what it publishes
// from the start: an initial-sync ADDED per node and Lease, then the heartbeats. Tests of
// filters that keep heartbeats quiet start it with their settings.
func recordHeartbeats(t *testing.T, extra map[string]string) *relaytest.Recording {
	t.Helper()
	vars := map[string]string{
		"RELAY_RESOURCES":  "nodes,leases.coordination.k8s.io",
		"RELAY_NAMESPACES": corev1.NamespaceNodeLease,
	}
	for k, v := range extra {
		vars[k] = v
	}
	return relaytest.Record(t, env, relayBin, relaytest.Name(t), vars, 2)
}

// heartbeats counts, per node name, the live MODIFIED events of Nodes whose Ready condition's
// lastHeartbeatTime moved forward, and of node Leases whose renewTime moved forward, each
// compared with the object's previous event.
func heartbeats(t *testing.T, events []relaytest.Event) (node, lease map[string]int) {
	node, lease = make(map[string]int), make(map[string]int)
	last := make(map[string]time.Time) // by uid
	for _, e := range events {
		var at time.Time
		switch e.Resource {
		case "nodes":
			var n corev1.Node
			if err := e.Decode(&n); err != nil {
				t.Fatalf("decode %s: %v", e.Subject, err)
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					at = c.LastHeartbeatTime.Time
				}
			}
		case "leases":
			var l coordinationv1.Lease
			if err := e.Decode(&l); err != nil {
				t.Fatalf("decode %s: %v", e.Subject, err)
			}
			if l.Spec.RenewTime != nil {
				at = l.Spec.RenewTime.Time
			}
		}
		prev, seen := last[e.UID]
		last[e.UID] = at
		if !seen || e.Type != event.Modified || e.Origin != event.Live || !at.After(prev) {
			continue
		}
		if e.Resource == "nodes" {
			node[e.Name]++
		} else {
			lease[e.Name]++
		}
	}
	return node, lease
}

// TestNodeAndLeaseHeartbeatsArePublished relays Nodes and node Leases and checks that kwok's
// heartbeats come through as MODIFIED events: Lease renewals every 10s and node status
// refreshes (every few seconds here, see nodeHeartbeat), for every simulated node. This is
// the churn the quiet-update filters exist to suppress.
func TestNodeAndLeaseHeartbeatsArePublished(t *testing.T) {
	logClusterOnFailure(t)
	rec := recordHeartbeats(t, nil)
	nodeNames := env.Cluster.Nodes()
	rec.Wait(t, fmt.Sprintf("%d heartbeats of every node's status and Lease", heartbeatsPerNode), eventTimeout,
		func(events []relaytest.Event) (bool, string) {
			node, lease := heartbeats(t, events)
			for _, n := range nodeNames {
				if node[n] < heartbeatsPerNode || lease[n] < heartbeatsPerNode {
					return false, fmt.Sprintf("status heartbeats %v, Lease renewals %v", node, lease)
				}
			}
			return true, ""
		})
	rec.CheckOrder(t)

	added := make(map[string]int)
	for _, e := range rec.Events() {
		if e.Type == event.Added {
			added[e.Resource]++
		}
	}
	if added["nodes"] != len(nodeNames) || added["leases"] != len(nodeNames) {
		t.Errorf("ADDED events by resource %v, want one per node for nodes and leases (%d nodes)", added, len(nodeNames))
	}
}

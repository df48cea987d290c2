package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// quietRules turns quiet updates on for Nodes and Leases: their heartbeats
// (status.conditions[*].lastHeartbeatTime, spec.renewTime) are default quiet fields.
const quietRules = `
resources:
  - resource: nodes
    quietUpdates: true
  - resource: leases.coordination.k8s.io
    quietUpdates: true
`

// markerLabel is set on every node and node Lease once heartbeats have gone by: a real
// change, which quiet updates must let through.
const markerLabel = "e2e.kube-nats-relay/marker"

// TestQuietUpdatesSilenceHeartbeats relays Nodes and node Leases with quiet updates on: kwok's
// heartbeats go by (seen on the API directly) without a single event, while a label change
// of each node and Lease is published.
func TestQuietUpdatesSilenceHeartbeats(t *testing.T) {
	logClusterOnFailure(t)
	cs := clientset(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(quietRules), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := recordHeartbeats(t, map[string]string{"RELAY_RULES_FILE": path})
	nodeNames := env.Cluster.Nodes()

	// Heartbeats happen meanwhile: every node's Lease is renewed twice and its status
	// refreshed twice, as the API itself shows.
	startLease, startNode := renewTimes(t, cs, nodeNames)
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, eventTimeout, true, func(context.Context) (bool, error) {
		lease, node := renewTimes(t, cs, nodeNames)
		for _, n := range nodeNames {
			if lease[n].Sub(startLease[n]) < heartbeatsPerNode*9*time.Second || !node[n].After(startNode[n].Add(nodeHeartbeat)) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("heartbeats did not happen: %v", err)
	}

	for _, n := range nodeNames {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"on"}}}`, markerLabel))
		if _, err := cs.CoreV1().Nodes().Patch(context.Background(), n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("label node %s: %v", n, err)
		}
		if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(context.Background(), n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("label lease %s: %v", n, err)
		}
	}
	// Events of one resource come in order: once every marker is in, every heartbeat
	// before it was decided on.
	rec.Wait(t, "the marker label of every node and Lease", eventTimeout, func(events []relaytest.Event) (bool, string) {
		marked := map[string]int{}
		for _, e := range events {
			if e.Type == event.Modified && hasMarker(t, e) {
				marked[e.Resource+"/"+e.Name]++
			}
		}
		return len(marked) == 2*len(nodeNames), fmt.Sprintf("marked %v", marked)
	})
	for _, e := range rec.Events() {
		if e.Type == event.Modified && !hasMarker(t, e) {
			t.Errorf("heartbeat published despite quiet updates: %s rv %s", e.Subject, e.ResourceVersion)
		}
	}
	rec.CheckOrder(t)
}

// hasMarker reports whether the event's object carries the marker label.
func hasMarker(t *testing.T, e relaytest.Event) bool {
	t.Helper()
	var obj metav1.PartialObjectMetadata
	if err := e.Decode(&obj); err != nil {
		t.Fatalf("decode %s: %v", e.Subject, err)
	}
	return obj.Labels[markerLabel] == "on"
}

// renewTimes reads each node's Lease renewTime and Ready condition heartbeat from the API.
func renewTimes(t *testing.T, cs kubernetes.Interface, nodeNames []string) (lease, node map[string]time.Time) {
	t.Helper()
	lease, node = make(map[string]time.Time), make(map[string]time.Time)
	for _, n := range nodeNames {
		var l *coordinationv1.Lease
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease %s: %v", n, err)
		}
		if l.Spec.RenewTime != nil {
			lease[n] = l.Spec.RenewTime.Time
		}
		nd, err := cs.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node %s: %v", n, err)
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				node[n] = c.LastHeartbeatTime.Time
			}
		}
	}
	return lease, node
}

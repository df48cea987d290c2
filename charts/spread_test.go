package charts_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestSpreadReplicasScheduleOnOneNode runs the chart's Deployment with two replicas on a
// one-node cluster (kube-controller-manager, kube-scheduler and one kwok node, started
// against the package's control plane for this test only): the default spread is soft, so
// both pods are scheduled on that node. The same Deployment with a hard anti-affinity over
// nodes (what a "required" default would be) leaves the second pod unschedulable, which
// shows the check can fail.
func TestSpreadReplicasScheduleOnOneNode(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	cluster, err := testenv.StartCluster(ctx, env.Kube, filepath.Join(t.TempDir(), "cluster"), testenv.ClusterOptions{Nodes: 1})
	if err != nil {
		t.Fatalf("start the cluster's controllers: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", cluster.LogTails())
		}
		cluster.Stop()
	})

	hard := []string{"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=kubernetes.io/hostname",
		"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app\\.kubernetes\\.io/instance=relay"}
	for _, tc := range []struct {
		name      string
		sets      []string
		scheduled int
	}{
		{"default spread: both scheduled", nil, 2},
		{"hard anti-affinity: one stays pending", hard, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := relaytest.Name(t)
			ensureNamespace(t, cs, ns)
			r := render(t, ns, nil, append([]string{"replicaCount=2"}, tc.sets...))
			var objs []string
			for _, o := range r.objs {
				if o.Kind == "Deployment" || o.Kind == "ServiceAccount" {
					objs = append(objs, string(o.JSON))
				}
			}
			applyManifests(t, strings.Join(objs, "\n---\n"), false)
			// Both pods exist; then wait until the scheduler has placed what it will place:
			// a pod is either bound to the node or marked Unschedulable.
			var state string
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
				pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=relay"})
				if err != nil {
					return false, err
				}
				scheduled, decided := 0, 0
				var parts []string
				for _, p := range pods.Items {
					switch {
					case p.Spec.NodeName != "":
						scheduled++
						decided++
						parts = append(parts, p.Name+" on "+p.Spec.NodeName)
					case unschedulable(p):
						decided++
						parts = append(parts, p.Name+" unschedulable")
					default:
						parts = append(parts, p.Name+" pending")
					}
				}
				state = fmt.Sprintf("%d scheduled: %s", scheduled, strings.Join(parts, ", "))
				return len(pods.Items) == 2 && decided == 2, nil
			})
			if err != nil {
				t.Fatalf("the scheduler did not decide on both pods: %v; last: %s", err, state)
			}
			if !strings.HasPrefix(state, fmt.Sprintf("%d scheduled", tc.scheduled)) {
				t.Errorf("pods: %s; want %d scheduled on the one node", state, tc.scheduled)
			}
		})
	}
}

// unschedulable reports whether the scheduler gave up on the pod for now.
func unschedulable(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

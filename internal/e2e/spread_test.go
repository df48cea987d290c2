package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// TestChartSpreadSchedulesReplicasOnOneNode installs the chart with two replicas held to one
// node (a nodeSelector on its host name): the default spread is soft, so the scheduler places
// both pods on that node. The same install with a hard anti-affinity over nodes (what a
// "required" default would be) leaves the second pod unschedulable, which shows the check can
// fail.
func TestChartSpreadSchedulesReplicasOnOneNode(t *testing.T) {
	logClusterOnFailure(t)
	node := env.Cluster.Nodes()[0]
	hard := []string{"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=kubernetes.io/hostname",
		"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app\\.kubernetes\\.io/instance=" + chartRelease}
	for _, tc := range []struct {
		name      string
		sets      []string
		scheduled int
	}{
		{"default spread: both scheduled", nil, 2},
		{"hard anti-affinity: one stays pending", hard, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := clientset(t)
			ns := relaytest.Name(t)
			createNamespace(t, cs, ns)
			sets := append([]string{"replicaCount=2", "nodeSelector.kubernetes\\.io/hostname=" + node}, tc.sets...)
			helmChart(t, append([]string{"install", chartRelease, chartDir, "--namespace", ns}, setFlags(sets)...)...)
			t.Cleanup(func() { _, _ = runHelm(t, "uninstall", chartRelease, "--namespace", ns) })
			// Both pods exist; then wait until the scheduler has placed what it will place:
			// a pod is either bound to the node or marked Unschedulable.
			var state string
			err := wait.PollUntilContextTimeout(context.Background(), pollInterval, eventTimeout, true, func(ctx context.Context) (bool, error) {
				pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + chartRelease})
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
				t.Errorf("pods: %s; want %d scheduled on node %s", state, tc.scheduled, node)
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

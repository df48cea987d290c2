package testenv

import (
	"context"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// kwokStages are the stage definitions kwok runs with: the files kwok v0.8.0 ships under
// kustomize/stage (node "fast", node "heartbeat-with-lease", pod "fast"), copied unchanged.
// kwok refuses to start without stages. Update them together with hack/tools/kwok.
//
//go:embed kwok/*.yaml
var kwokStages embed.FS

const (
	// kwokHeartbeatStage is the stage that refreshes a node's status; its delay is what
	// ClusterOptions.NodeHeartbeat replaces.
	kwokHeartbeatStage = "kwok/node-heartbeat-with-lease.yaml"

	// KwokNodeAnnotation is the annotation (with value "fake") that hands a Node to kwok: it
	// plays kubelet for it, heartbeats its Lease and runs the Pods scheduled on it.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// kwokPodCIDR is where kwok takes Pod IPs from: away from serviceCIDR, and large enough
	// for benchmarks that run tens of thousands of Pods.
	kwokPodCIDR = "10.244.0.0/16"
	// nodeLeaseSeconds is the Lease duration kwok gives its nodes; it renews a Lease every
	// quarter of it (10s), as a kubelet does with the same default.
	nodeLeaseSeconds = 40
)

// writeKwokStages writes the stage files into dir and returns their paths. A non-zero
// heartbeat replaces the node status heartbeat delay of the heartbeat stage.
func writeKwokStages(dir string, heartbeat time.Duration) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	entries, err := kwokStages.ReadDir("kwok")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		name := "kwok/" + e.Name()
		b, err := kwokStages.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if name == kwokHeartbeatStage && heartbeat > 0 {
			if b, err = setStageDelay(b, heartbeat); err != nil {
				return nil, fmt.Errorf("stage %s: %w", name, err)
			}
		}
		p := filepath.Join(dir, e.Name())
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// setStageDelay returns the stage with its delay set to d plus up to a tenth of d, the same
// proportions as the shipped stage's 10 minutes plus up to 10 seconds.
func setStageDelay(stage []byte, d time.Duration) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(stage, &obj); err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]any)
	delay, _ := spec["delay"].(map[string]any)
	if delay == nil {
		return nil, fmt.Errorf("no spec.delay")
	}
	delay["durationMilliseconds"] = d.Milliseconds()
	// kwok waits a random time between durationMilliseconds and jitterDurationMilliseconds.
	delay["jitterDurationMilliseconds"] = (d + d/10).Milliseconds()
	return yaml.Marshal(obj)
}

// NodeName is the name of simulated node i (from 0).
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// createNode creates a Node that kwok manages, labelled like a small amd64 Linux machine,
// following kwok's documentation. Unlike kwok's example it has no
// kwok.x-k8s.io/node=fake:NoSchedule taint: that taint keeps real workloads off fake nodes in
// a cluster that has real ones, and here every node is fake, so Pods need no toleration.
func createNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				KwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"beta.kubernetes.io/arch":       "amd64",
				"beta.kubernetes.io/os":         "linux",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
				"type":                          "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

// nodeSchedulable reports whether node is Ready and free of the taints that keep Pods away
// from a node that is not (yet) ready; on false it says why.
func nodeSchedulable(node *corev1.Node) (bool, string) {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return false, "node " + node.Name + " not Ready"
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false, fmt.Sprintf("node %s still has taint %s", node.Name, t.Key)
		}
	}
	return true, ""
}

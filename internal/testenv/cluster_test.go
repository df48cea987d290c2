package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

func TestSetStageDelay(t *testing.T) {
	orig, err := kwokStages.ReadFile(kwokHeartbeatStage)
	if err != nil {
		t.Fatal(err)
	}
	got, err := setStageDelay(orig, 2*time.Second)
	if err != nil {
		t.Fatalf("setStageDelay: %v", err)
	}
	var before, after struct {
		Metadata struct{ Name string }
		Spec     struct {
			Delay struct {
				DurationMilliseconds       int64 `json:"durationMilliseconds"`
				JitterDurationMilliseconds int64 `json:"jitterDurationMilliseconds"`
			}
			Next struct {
				StatusTemplate string `json:"statusTemplate"`
			}
		}
	}
	if err := yaml.Unmarshal(orig, &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(got, &after); err != nil {
		t.Fatalf("rewritten stage is not YAML: %v\n%s", err, got)
	}
	if d := after.Spec.Delay; d.DurationMilliseconds != 2000 || d.JitterDurationMilliseconds != 2200 {
		t.Errorf("delay %+v, want 2000ms plus jitter up to 2200ms", d)
	}
	if after.Metadata.Name != before.Metadata.Name || after.Spec.Next.StatusTemplate != before.Spec.Next.StatusTemplate {
		t.Errorf("rewrite changed more than the delay:\n%s", got)
	}
	if before.Spec.Delay.DurationMilliseconds != 600000 {
		t.Errorf("shipped stage delay %dms, want 600000 (did the kwok files change?)", before.Spec.Delay.DurationMilliseconds)
	}
}

// TestClusterRunsPodsOnSimulatedNodes starts the cluster parts on the package's control plane
// and checks what the relay's tests rely on: Pods of a Deployment run on the simulated nodes,
// both kinds of heartbeat happen, and a namespace deletion removes the namespace's contents.
func TestClusterRunsPodsOnSimulatedNodes(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	const heartbeat = 2 * time.Second
	c, err := StartCluster(ctx, env.Kube, env.TempDir(t), ClusterOptions{Nodes: 2, NodeHeartbeat: heartbeat})
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.LogTails())
		}
		c.Stop()
	})
	if got := c.Nodes(); len(got) != 2 {
		t.Fatalf("Nodes() = %v, want 2 nodes", got)
	}
	cs := clientset(t, env.Kube.RESTConfig())
	ns := createNamespace(t, cs)

	appLabels := map[string]string{"app": "web"}
	replicas := int32(3)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: appLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: appLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	var pods []corev1.Pod
	poll(ctx, t, "3 Running Pods on simulated nodes", func() (bool, string) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(appLabels).String()})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
				running++
			}
		}
		pods = list.Items
		return running == 3 && len(list.Items) == 3, describePods(list.Items)
	})

	nodeHeartbeat := func() time.Time {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName(0), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node: %v", err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	leaseRenew := func() time.Time {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, NodeName(0), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease: %v", err)
		}
		if l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}
	firstHeartbeat, firstRenew := nodeHeartbeat(), leaseRenew()
	poll(ctx, t, "a newer node status heartbeat and Lease renewal", func() (bool, string) {
		h, r := nodeHeartbeat(), leaseRenew()
		return h.After(firstHeartbeat) && r.After(firstRenew),
			"node heartbeat " + h.String() + ", lease renewed " + r.String()
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	poll(ctx, t, "namespace "+ns+" and its Pods gone", func() (bool, string) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, "namespace still there"
		}
		for _, p := range pods {
			// A Pod of the same name cannot come back: the namespace is gone.
			if _, err := cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "pod " + p.Name + " still there"
			}
		}
		return true, ""
	})
}

// poll waits until cond holds, failing the test with cond's last explanation when ctx ends.
func poll(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		var ok bool
		ok, last = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

func describePods(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, p.Name+"="+string(p.Status.Phase)+"@"+p.Spec.NodeName)
	}
	return strings.Join(parts, ", ")
}

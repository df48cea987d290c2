package e2e

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// TestDeploymentPodsCarryOwnerReferences creates a Deployment and scales it up and down, and
// checks what the relay publishes of the objects the controllers make: the ReplicaSet's body
// names the Deployment as its controller, every Pod's body names the ReplicaSet, every Pod
// starts Pending and reaches Running in the stream, and the Pods removed by the scale-down
// are published as DELETED.
func TestDeploymentPodsCarryOwnerReferences(t *testing.T) {
	logClusterOnFailure(t)
	ctx := context.Background()
	cs := clientset(t)
	ns := relaytest.Name(t)
	rec := relaytest.Record(t, env, relayBin, ns, map[string]string{
		"RELAY_RESOURCES":  "deployments.apps,replicasets.apps,pods",
		"RELAY_NAMESPACES": ns,
	}, 3)
	createNamespace(t, cs, ns)

	d, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(3), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods := waitRunningPods(t, cs, ns, 3)
	rsList, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(rsList.Items) != 1 {
		t.Fatalf("list replicasets: %d, %v; want one", len(rsList.Items), err)
	}
	rs := rsList.Items[0]
	rec.Wait(t, "the 3 Pods Running in the stream", eventTimeout, runningInStream(pods))

	scale(t, cs, ns, 5)
	pods = waitRunningPods(t, cs, ns, 5)
	rec.Wait(t, "the 5 Pods Running in the stream", eventTimeout, runningInStream(pods))

	scale(t, cs, ns, 2)
	kept := waitRunningPods(t, cs, ns, 2)
	removed := make(map[types.UID]string)
	for _, p := range pods {
		removed[p.UID] = p.Name
	}
	for _, p := range kept {
		delete(removed, p.UID)
	}
	rec.Wait(t, "DELETED of the 3 Pods removed by the scale-down", eventTimeout, func(events []relaytest.Event) (bool, string) {
		n := 0
		for _, e := range events {
			if e.Type == event.Deleted && e.Resource == "pods" && removed[types.UID(e.UID)] != "" {
				n++
			}
		}
		return n == len(removed), fmt.Sprintf("%d of %d", n, len(removed))
	})
	rec.CheckOrder(t)

	// Every published body of the ReplicaSet and of the Pods carries its controller.
	events := rec.Events()
	firstOfPod := make(map[string]relaytest.Event)
	counts := make(map[string]int)
	for _, e := range events {
		counts[e.Resource]++
		switch e.Resource {
		case "replicasets":
			var got appsv1.ReplicaSet
			if err := e.Decode(&got); err != nil {
				t.Fatalf("decode %s: %v", e.Subject, err)
			}
			checkController(t, e, &got, "Deployment", d.Name, d.UID)
		case "pods":
			var got corev1.Pod
			if err := e.Decode(&got); err != nil {
				t.Fatalf("decode %s: %v", e.Subject, err)
			}
			checkController(t, e, &got, "ReplicaSet", rs.Name, rs.UID)
			if _, ok := firstOfPod[e.UID]; !ok {
				firstOfPod[e.UID] = e
				if e.Type != event.Added || got.Status.Phase != corev1.PodPending {
					t.Errorf("first event of pod %s: %s in phase %q, want %s in phase Pending", e.Name, e.Type, got.Status.Phase, event.Added)
				}
			}
		}
	}
	if counts["deployments"] == 0 || counts["replicasets"] == 0 {
		t.Errorf("events by resource %v, want the Deployment's and the ReplicaSet's too", counts)
	}
	if len(firstOfPod) != 5 {
		t.Errorf("events of %d distinct pods, want 5 (3, then 2 more when scaled to 5)", len(firstOfPod))
	}
	t.Logf("events by resource: %v", counts)
}

// runningInStream reports whether, for each of pods, the stream holds an event whose body
// shows the Pod Running on a node.
func runningInStream(pods []corev1.Pod) func([]relaytest.Event) (bool, string) {
	return func(events []relaytest.Event) (bool, string) {
		running := make(map[string]bool)
		for _, e := range events {
			if e.Resource != "pods" || e.Type == event.Deleted {
				continue
			}
			var p corev1.Pod
			if err := e.Decode(&p); err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running[e.UID] = true
			}
		}
		var waiting []string
		for _, p := range pods {
			if !running[string(p.UID)] {
				waiting = append(waiting, p.Name)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("not Running in the stream yet: %v", waiting)
	}
}

// checkController fails the test unless obj's controlling owner is the kind, name and uid
// given.
func checkController(t *testing.T, e relaytest.Event, obj metav1.Object, kind, name string, uid types.UID) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		t.Errorf("%s %s rv %s: no controller in ownerReferences %v", e.Type, e.Subject, e.ResourceVersion, obj.GetOwnerReferences())
		return
	}
	if ref.Kind != kind || ref.Name != name || ref.UID != uid {
		t.Errorf("%s %s rv %s: controller %s %s uid %s, want %s %s uid %s",
			e.Type, e.Subject, e.ResourceVersion, ref.Kind, ref.Name, ref.UID, kind, name, uid)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/internal/derivedtest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

const (
	// libraryFile is the shipped library of derived events the test runs the relay with.
	libraryFile = "../../examples/rules/derived.yaml"
	// libraryResources are the resources the library has rules for.
	libraryResources = "pods,deployments.apps,jobs.batch,persistentvolumeclaims,nodes,namespaces"
	// librarySources is the number of checkpoints of a relay of libraryResources limited to
	// one namespace: one per namespaced resource, one per cluster-scoped one.
	librarySources = 6
)

// TestDerivedLibraryFollowsControllers runs the relay with the shipped library of derived
// events and makes the cluster's controllers cross every condition of it: a Deployment rolls
// out and one cannot (no node matches it), a Job completes (kwok runs its Pod) and one runs
// out of time, the persistent volume controller binds a claim, the namespace controller
// deletes a namespace. What no controller of the test bed writes, the test writes as the
// kubelet would, through the status subresource: a container OOM-killed, then restarted, a
// Pod unready then ready again, a Node reporting Ready then NotReady.
//
// It replays every change the relay published through derivedtest's oracle (the contract,
// evaluated apart from the engine) and requires the library's events for the story's objects
// from it: the conditions hold on the objects real controllers write.
func TestDerivedLibraryFollowsControllers(t *testing.T) {
	logClusterOnFailure(t)
	ctx := context.Background()
	cs := clientset(t)
	ns := relaytest.Name(t)
	lib, err := derivedtest.Load(libraryFile)
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := derivedtest.NewOracle(lib)
	if err != nil {
		t.Fatal(err)
	}
	rec := relaytest.Record(t, env, relayBin, ns, map[string]string{
		"RELAY_RESOURCES":  libraryResources,
		"RELAY_NAMESPACES": ns,
	}, librarySources)

	createNamespace(t, cs, ns)
	createLibraryObjects(t, cs, ns)
	worker := "worker"
	waitAPI(t, "pod worker Ready (kwok)", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, worker, metav1.GetOptions{})
		return err == nil && podIsReady(p), err
	})
	// The kubelet sees the container killed by the kernel's OOM killer: it reports the
	// termination and the Pod unready in one status update, then the restarted container
	// (restartCount 1, the termination as its last state), then the Pod ready again.
	terminated := corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
		ContainerID: "containerd://" + ns + "-1", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}
	updatePodStatus(t, cs, ns, worker, func(s *corev1.PodStatus) {
		setPodReady(s, false, "ContainersNotReady")
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &terminated}
	})
	updatePodStatus(t, cs, ns, worker, func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].RestartCount = 1
		s.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &terminated}
		s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	})
	updatePodStatus(t, cs, ns, worker, func(s *corev1.PodStatus) { setPodReady(s, true, "") })
	// The test's node: its kubelet reports Ready, then NotReady.
	updateNodeStatus(t, cs, ns, func(s *corev1.NodeStatus) { s.Conditions = []corev1.NodeCondition{nodeReadyStatus(true)} })
	updateNodeStatus(t, cs, ns, func(s *corev1.NodeStatus) { s.Conditions = []corev1.NodeCondition{nodeReadyStatus(false)} })

	want := map[string][]string{
		"pods/" + worker:                   {"ready", "unready", "oom-killed", "restarted", "ready"},
		"deployments/web":                  {"rollout-complete"},
		"deployments/stuck":                {"rollout-stalled"},
		"jobs/done":                        {"succeeded"},
		"jobs/late":                        {"failed"},
		"persistentvolumeclaims/data":      {"bound"},
		"nodes/" + ns:                      {"ready", "not-ready"},
		"nodes/" + env.Cluster.Nodes()[0]: {"ready"}, // kwok's report, published by the initial sync
	}
	rec.Wait(t, "the story's derived events", eventTimeout, func(events []relaytest.Event) (bool, string) {
		return derivedMatch(ctx, t, oracle, ns, events, want)
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	want["namespaces/"+ns] = []string{"terminating"}
	rec.Wait(t, "the namespace deleted and its derived events", eventTimeout, func(events []relaytest.Event) (bool, string) {
		gone := slices.ContainsFunc(events, func(e relaytest.Event) bool {
			return e.Resource == "namespaces" && e.Name == ns && e.Type == event.Deleted
		})
		ok, why := derivedMatch(ctx, t, oracle, ns, events, want)
		return ok && gone, fmt.Sprintf("namespace deleted in the stream: %t; %s", gone, why)
	})
	rec.CheckOrder(t)

	// Every Pod of Deployment web became ready once, and no Pod of the story became ready twice
	// but worker.
	fired := oracleFires(ctx, t, oracle, ns, rec.Events())
	web := 0
	for obj, names := range fired {
		if strings.HasPrefix(obj, "pods/web-") {
			web++
			if !slices.Equal(names, []string{"ready"}) {
				t.Errorf("%s: derived %v, want [ready]", obj, names)
			}
		}
	}
	if web != 2 {
		t.Errorf("derived events of %d Pods of Deployment web, want 2", web)
	}
}

// createLibraryObjects creates the story's objects in namespace ns, and the cluster-scoped
// ones named ns (deleted when the test ends).
func createLibraryObjects(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	sc, pv, pvc := libraryVolume(ns, ns)
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	check("storage class", err)
	t.Cleanup(func() { _ = cs.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{}) })
	_, err = cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	check("persistent volume", err)
	t.Cleanup(func() { _ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{}) })
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	check("claim", err)

	// Deployment web runs on the test bed's nodes; stuck's Pod fits no node, and after a
	// second without progress the deployment controller reports ProgressDeadlineExceeded.
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, libraryDeployment("web", 2, 600, nil), metav1.CreateOptions{})
	check("deployment web", err)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, libraryDeployment("stuck", 1, 1, nowhere), metav1.CreateOptions{})
	check("deployment stuck", err)
	// Job done's Pod kwok runs to completion; job late's Pod fits no node, and the job
	// controller fails the Job after its one-second deadline.
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, libraryJob("done", nil, nil), metav1.CreateOptions{})
	check("job done", err)
	deadline := int64(1)
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, libraryJob("late", &deadline, nowhere), metav1.CreateOptions{})
	check("job late", err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker"}, Spec: podTemplate("worker", nil, corev1.RestartPolicyAlways).Spec}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	check("pod worker", err)

	_, err = cs.CoreV1().Nodes().Create(ctx, libraryNode(ns), metav1.CreateOptions{})
	check("node", err)
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// oracleFires replays the events of the story (namespace ns, the node and namespace named
// ns) and of the test bed's nodes through the oracle, each with the previous state the
// stream holds of its object, and returns the derived events per object
// ("resource/name"), in order.
func oracleFires(ctx context.Context, t *testing.T, oracle *derivedtest.Oracle, ns string, events []relaytest.Event) map[string][]string {
	t.Helper()
	last := make(map[types.UID]map[string]any)
	fired := make(map[string][]string)
	for _, e := range events {
		if e.Namespace != ns && e.Resource != "nodes" && !(e.Resource == "namespaces" && e.Name == ns) {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(e.Body, &obj); err != nil {
			t.Fatalf("%s: body: %v", e.Subject, err)
		}
		uid := types.UID(e.UID)
		names, err := oracle.Fire(ctx, e.Group, e.Resource, filter.Change{Type: e.Type, Origin: e.Origin, Object: obj, Old: last[uid]})
		if err != nil {
			t.Fatalf("%s rv %s: %v", e.Subject, e.ResourceVersion, err)
		}
		last[uid] = obj
		key := e.Resource + "/" + e.Name
		fired[key] = append(fired[key], names...)
	}
	return fired
}

// derivedMatch reports whether the oracle's derived events of each object of want are
// exactly want's, and says which are not.
func derivedMatch(ctx context.Context, t *testing.T, oracle *derivedtest.Oracle, ns string, events []relaytest.Event, want map[string][]string) (bool, string) {
	fired := oracleFires(ctx, t, oracle, ns, events)
	var diffs []string
	for _, obj := range sortedKeys(want) {
		if got := fired[obj]; !slices.Equal(got, want[obj]) {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", obj, got, want[obj]))
		}
	}
	return len(diffs) == 0, strings.Join(diffs, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

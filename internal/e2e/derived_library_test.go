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
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/derivedtest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

const (
	// libraryFile is the shipped library of derived events the test runs the relay with.
	libraryFile = "../../examples/rules/derived.yaml"
	// librarySources is the number of checkpoints of a relay of the library's resources
	// limited to one namespace: one per namespaced resource (pods, deployments, jobs,
	// claims), one per cluster-scoped one (nodes, namespaces).
	librarySources = 6
	// subjectPrefix is the relay's default subject prefix, which the test keeps.
	subjectPrefix = "kube"
)

// TestDerivedLibraryFollowsControllers runs the relay with the shipped library of derived
// events and makes the cluster's controllers cross every condition of it: a Deployment rolls
// out and one cannot (no node matches it), a Job completes (kwok runs its Pod) and one runs
// out of time, the persistent volume controller binds a claim, the namespace controller
// deletes a namespace. What no controller of the test bed writes, the test writes as the
// kubelet would, through the status subresource: a container OOM-killed, then restarted, a
// Pod unready then ready again, a Node reporting Ready then NotReady.
//
// It requires the library's events of the story's objects, each exactly once; and it replays
// every change the relay published through derivedtest's oracle (the contract, evaluated
// apart from the engine) and requires the relay's derived events to be exactly the oracle's,
// each after the change it derives from and before the object's next change.
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
		"RELAY_RULES_FILE": libraryFile,
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
		"pods/" + worker:                  {"ready", "unready", "oom-killed", "restarted", "ready"},
		"deployments/web":                 {"rollout-complete"},
		"deployments/stuck":               {"rollout-stalled"},
		"jobs/done":                       {"succeeded"},
		"jobs/late":                       {"failed"},
		"persistentvolumeclaims/data":     {"bound"},
		"nodes/" + ns:                     {"ready", "not-ready"},
		"nodes/" + env.Cluster.Nodes()[0]: {"ready"}, // kwok's report, published by the initial sync
	}
	rec.Wait(t, "the story's derived events", eventTimeout, func(events []relaytest.Event) (bool, string) {
		return derivedMatch(derivedByObject(events), want)
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	want["namespaces/"+ns] = []string{"terminating"}
	rec.Wait(t, "the namespace deleted and its derived events", eventTimeout, func(events []relaytest.Event) (bool, string) {
		gone := slices.ContainsFunc(events, func(e relaytest.Event) bool {
			return e.Derived == "" && e.Resource == "namespaces" && e.Name == ns && e.Type == event.Deleted
		})
		ok, why := derivedMatch(derivedByObject(events), want)
		return ok && gone, fmt.Sprintf("namespace deleted in the stream: %t; %s", gone, why)
	})
	// The last changes' derived events may still be in flight: wait until the stream holds
	// every one the oracle expects (and never more).
	rec.Wait(t, "the derived events the oracle expects", eventTimeout, func(events []relaytest.Event) (bool, string) {
		return matchOracle(ctx, t, oracle, events)
	})
	events := rec.Events()
	checkContract(t, events)

	// Every Pod of Deployment web became ready once.
	web := 0
	for obj, names := range derivedByObject(events) {
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
	checkProjection(t, events, "pods", worker, "oom-killed")
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
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	_, err = cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	check("persistent volume", err)
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
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

// derivedByObject returns the names of the derived events in events, by object
// ("resource/name"), in stream order.
//
// Deployment stuck's stall may be reported more than once, each time as a new stall (the
// oracle checks that the condition stopped holding in between): when the ReplicaSet's status
// shows its Pod only after the deployment controller found the deadline exceeded, the
// controller counts that as progress (Progressing True, ReplicaSetUpdated) and reports the
// stall again a second later. Its repeats are folded into one.
func derivedByObject(events []relaytest.Event) map[string][]string {
	out := make(map[string][]string)
	for _, e := range events {
		if e.Derived != "" {
			key := e.Resource + "/" + e.Name
			out[key] = append(out[key], e.Derived)
		}
	}
	if stuck := out["deployments/stuck"]; stuck != nil {
		out["deployments/stuck"] = slices.Compact(stuck)
	}
	return out
}

// derivedMatch reports whether the derived events of each object of want are exactly
// want's, and says which are not.
func derivedMatch(got, want map[string][]string) (bool, string) {
	var diffs []string
	for _, obj := range sortedKeys(want) {
		if !slices.Equal(got[obj], want[obj]) {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", obj, got[obj], want[obj]))
		}
	}
	return len(diffs) == 0, strings.Join(diffs, "; ")
}

// matchOracle replays the ordinary events through the oracle, each with the previous state
// the stream holds of its object, and reports whether the derived events of each change (by
// k8s-derived-from) are exactly the oracle's, in rule order.
func matchOracle(ctx context.Context, t *testing.T, oracle *derivedtest.Oracle, events []relaytest.Event) (bool, string) {
	t.Helper()
	last := make(map[string]map[string]any)
	want := make(map[string][]string)
	got := make(map[string][]string)
	what := make(map[string]string)
	for _, e := range events {
		if e.Derived != "" {
			from := e.Header.Get(event.HeaderDerivedFrom)
			got[from] = append(got[from], e.Derived)
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(e.Body, &obj); err != nil {
			t.Fatalf("%s: body: %v", e.Subject, err)
		}
		names, err := oracle.Fire(ctx, e.Group, e.Resource, filter.Change{Type: e.Type, Origin: e.Origin, Object: obj, Old: last[e.UID]})
		if err != nil {
			t.Fatalf("%s rv %s: %v", e.Subject, e.ResourceVersion, err)
		}
		last[e.UID] = obj
		id := e.ID()
		want[id] = names
		what[id] = fmt.Sprintf("%s %s/%s rv %s", e.Type, e.Resource, e.Name, e.ResourceVersion)
	}
	var diffs []string
	for id, names := range got {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("derived %v from %s, a change not in the stream", names, id))
		}
	}
	for id, names := range want {
		if !slices.Equal(got[id], names) {
			diffs = append(diffs, fmt.Sprintf("%s: derived %v, the oracle says %v", what[id], got[id], names))
		}
	}
	slices.Sort(diffs)
	return len(diffs) == 0, strings.Join(diffs, "; ")
}

// checkContract checks every event against the contract: the envelope (subject, id, body
// identity), unique ids, the per-object order of the ordinary events (a derived event carries
// its change's resourceVersion), and each derived event after the change it derives from and
// before the object's next change, once per change and name.
func checkContract(t *testing.T, events []relaytest.Event) {
	t.Helper()
	msgs := make([]contract.Message, len(events))
	for i, e := range events {
		msgs[i] = contract.Message{Seq: e.Seq, Subject: e.Subject, Header: e.Header, Meta: e.Meta}
		if err := e.Decode(&msgs[i].Body); err != nil {
			t.Fatalf("%s: body: %v", e.Subject, err)
		}
	}
	relaytest.Report(t, "envelope", contract.Envelope(msgs, subjectPrefix))
	relaytest.Report(t, "no duplicate ids", contract.NoDuplicateIDs(msgs))
	relaytest.Report(t, "per-uid order", contract.PerUIDOrder(contract.Ordinary(msgs)))
	relaytest.Report(t, "derived events", contract.Derived(msgs))
}

// checkProjection requires the body of derived event name of resource/name to hold the
// projected status.containerStatuses and the identity, and not spec.containers.
func checkProjection(t *testing.T, events []relaytest.Event, resource, name, derived string) {
	t.Helper()
	for _, e := range events {
		if e.Resource != resource || e.Name != name || e.Derived != derived {
			continue
		}
		var p corev1.Pod
		if err := e.Decode(&p); err != nil {
			t.Fatalf("%s: %v", e.Subject, err)
		}
		if p.Name != name || p.UID == "" || len(p.Status.ContainerStatuses) == 0 || len(p.Spec.Containers) != 0 {
			t.Errorf("%s: body %s, want the identity and status.containerStatuses only", e.Subject, e.Body)
		}
		return
	}
	t.Errorf("no derived %s of %s/%s", derived, resource, name)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

const (
	// chartDir is the Helm chart, relative to this package.
	chartDir = "../../charts/kube-nats-relay"
	// chartRelease is the release name of the chart tests; the Deployment is named after it.
	chartRelease = "relay"
	// chartDeployment is the chart's Deployment for release chartRelease.
	chartDeployment = chartRelease + "-kube-nats-relay"
)

// TestChartUpgradeNeverRunsAnUnelectedRelayBesideAnElectedOne installs the chart with one
// replica and upgrades it to two, as `helm install` and `helm upgrade` do, while the
// controllers roll the pods: at no instant may a Running pod relay without leader election
// beside one that campaigns for the Lease (the unelected one relays whoever holds it). Two
// ways there: scaling with the defaults, and turning leader election on for pods that run
// without it.
func TestChartUpgradeNeverRunsAnUnelectedRelayBesideAnElectedOne(t *testing.T) {
	logClusterOnFailure(t)
	for _, tc := range []struct {
		name             string
		install, upgrade []string
		// wantUnelected: pods without leader election run before the upgrade.
		wantUnelected bool
	}{
		{"scale from one to two replicas", nil, []string{"replicaCount=2"}, false},
		{"turn leader election on while scaling", []string{"leaderElection.enabled=false"},
			[]string{"replicaCount=2", "leaderElection.enabled=true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := clientset(t)
			ns := relaytest.Name(t)
			createNamespace(t, cs, ns)
			w := watchRelayPods(t, cs, ns)

			helmChart(t, append([]string{"install", chartRelease, chartDir, "--namespace", ns}, setFlags(tc.install)...)...)
			t.Cleanup(func() { _, _ = runHelm(t, "uninstall", chartRelease, "--namespace", ns) })
			waitRolledOut(t, cs, ns, 1)
			helmChart(t, append([]string{"upgrade", chartRelease, chartDir, "--namespace", ns}, setFlags(tc.upgrade)...)...)
			waitRolledOut(t, cs, ns, 2)

			mixed, seen := w.stop(t)
			if len(mixed) > 0 {
				t.Errorf("Running pods with and without leader election at once, %d times; first: %s", len(mixed), mixed[0])
			}
			want := []string{"true"}
			if tc.wantUnelected {
				want = []string{"false", "true"}
			}
			if !slices.Equal(seen, want) {
				t.Errorf("RELAY_LEADER_ELECT of the Running pods seen: %q, want %q", seen, want)
			}
		})
	}
}

// podWatch follows the relay's pods in one namespace and records every moment at which
// Running pods with and without leader election coexist.
type podWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	mixed   []string        // each moment of coexistence, described
	seen    map[string]bool // RELAY_LEADER_ELECT values of Running pods
	failure error
}

// watchRelayPods starts a podWatch on namespace ns, before anything runs there.
func watchRelayPods(t *testing.T, cs kubernetes.Interface, ns string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		cancel()
		t.Fatalf("list pods in %s: %d pods, %v; want none", ns, len(list.Items), err)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &podWatch{cancel: cancel, done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(w.done)
		defer rw.Stop()
		// A pod counts as running from phase Running until it is gone: a terminating pod's
		// process may still relay during its grace period.
		running := map[string]string{} // pod name -> RELAY_LEADER_ELECT
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					w.mu.Lock()
					w.failure = fmt.Errorf("watch event %s of %T", ev.Type, ev.Object)
					w.mu.Unlock()
					return
				}
				if ev.Type == watch.Deleted || pod.Status.Phase != corev1.PodRunning {
					delete(running, pod.Name)
				} else {
					running[pod.Name] = leaderElectOf(pod)
				}
				w.observe(running)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-w.done })
	return w
}

// observe records the running pods' state.
func (w *podWatch) observe(running map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	elected, unelected := false, false
	var desc []string
	for name, le := range running {
		w.seen[le] = true
		if le == "true" {
			elected = true
		} else {
			unelected = true
		}
		desc = append(desc, name+" RELAY_LEADER_ELECT="+le)
	}
	if elected && unelected {
		slices.Sort(desc)
		w.mixed = append(w.mixed, strings.Join(desc, ", "))
	}
}

// stop ends the watch and returns the moments of coexistence and the RELAY_LEADER_ELECT
// values seen on Running pods, sorted.
func (w *podWatch) stop(t *testing.T) (mixed, seen []string) {
	t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure != nil {
		t.Fatal(w.failure)
	}
	for v := range w.seen {
		seen = append(seen, v)
	}
	slices.Sort(seen)
	return w.mixed, seen
}

// leaderElectOf returns the relay container's RELAY_LEADER_ELECT ("unset" when missing).
func leaderElectOf(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.Name != "relay" {
			continue
		}
		for _, e := range c.Env {
			if e.Name == "RELAY_LEADER_ELECT" {
				return e.Value
			}
		}
	}
	return "unset"
}

// waitRolledOut waits until the chart's Deployment has rolled out its current template to n
// Running pods and no other pod is left.
func waitRolledOut(t *testing.T, cs kubernetes.Interface, ns string, n int32) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, eventTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, chartDeployment, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		s := d.Status
		last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d, %d pods",
			d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, len(pods.Items))
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return rolledOut(d, n) && len(pods.Items) == int(n) && running == int(n), nil
	})
	if err != nil {
		t.Fatalf("Deployment %s/%s not rolled out to %d pods: %v (last: %s)", ns, chartDeployment, n, err, last)
	}
}

// rolledOut reports whether d's controller has acted on its spec and every replica runs it.
func rolledOut(d *appsv1.Deployment, n int32) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == n && s.UpdatedReplicas == n && s.AvailableReplicas == n
}

// setFlags turns helm --set pairs into flags.
func setFlags(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// helmChart runs helm against the test bed and fails the test on an error.
func helmChart(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runHelm runs the helm of the test bed's binaries as the apiserver's admin, with caches and
// configuration in a temporary HOME, and returns its stdout; stderr is in the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(dir, "helm"), append(args, "--kubeconfig", env.Kube.KubeconfigPath())...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

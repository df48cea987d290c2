package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// relayed is a resource the relay is told to watch, with the GroupVersionResource the test
// lists it with.
type relayed struct {
	name string // as RELAY_RESOURCES spells it
	gvr  schema.GroupVersionResource
}

// namespaceContents are the kinds of objects the namespace deletion test fills a namespace
// with, directly or through controllers.
var namespaceContents = []relayed{
	{"configmaps", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
	{"secrets", schema.GroupVersionResource{Version: "v1", Resource: "secrets"}},
	{"serviceaccounts", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}},
	{"deployments.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
	{"replicasets.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}},
	{"pods", schema.GroupVersionResource{Version: "v1", Resource: "pods"}},
}

const (
	// The namespace deletion test's population: enough objects that the namespace controller
	// deletes them in bulk (deletecollection), of every kind above.
	cascadeConfigMaps = 60
	cascadeSecrets    = 30
	cascadePods       = 10
)

// TestNamespaceDeletionPublishesEveryDeleted fills a namespace with ConfigMaps, Secrets and a
// Deployment with its ReplicaSet and Pods, deletes the namespace, and checks that the relay
// publishes the DELETED event of every object the namespace held: those listed from the API
// just before the deletion, and any other the relay ever published.
func TestNamespaceDeletionPublishesEveryDeleted(t *testing.T) {
	logClusterOnFailure(t)
	ctx := context.Background()
	cs := clientset(t)
	dyn, err := dynamic.NewForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := relaytest.Name(t)
	var names []string
	for _, r := range namespaceContents {
		names = append(names, r.name)
	}
	rec := relaytest.Record(t, env, relayBin, ns, map[string]string{
		"RELAY_RESOURCES":  strings.Join(names, ","),
		"RELAY_NAMESPACES": ns,
	}, len(namespaceContents))

	createNamespace(t, cs, ns)
	for i := range cascadeConfigMaps {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%02d", i)},
			Data:       map[string]string{"index": fmt.Sprint(i)},
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create configmap: %v", err)
		}
	}
	for i := range cascadeSecrets {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("token-%02d", i)},
			StringData: map[string]string{"token": fmt.Sprintf("not-a-real-token-%d", i)},
		}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create secret: %v", err)
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(cascadePods), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	waitRunningPods(t, cs, ns, cascadePods)

	// The ground truth: every object in the namespace just before the deletion, by uid.
	existing := make(map[string]string)
	count := make(map[string]int)
	for _, r := range namespaceContents {
		list, err := dyn.Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", r.name, err)
		}
		for _, o := range list.Items {
			existing[string(o.GetUID())] = r.gvr.Resource + " " + o.GetName()
			count[r.gvr.Resource]++
		}
	}
	// What the test made, plus what controllers add: the kube-root-ca.crt ConfigMap, the
	// default ServiceAccount, the ReplicaSet.
	want := map[string]int{
		"configmaps": cascadeConfigMaps + 1, "secrets": cascadeSecrets, "serviceaccounts": 1,
		"deployments": 1, "replicasets": 1, "pods": cascadePods,
	}
	for res, n := range want {
		if count[res] != n {
			t.Fatalf("listed %d %s in %s before the deletion, want %d", count[res], res, ns, n)
		}
	}
	rec.Wait(t, "an event for every object in the namespace", eventTimeout, func(events []relaytest.Event) (bool, string) {
		missing := missingUIDs(existing, events, func(relaytest.Event) bool { return true })
		return len(missing) == 0, fmt.Sprintf("%d objects without an event, e.g. %v", len(missing), first(missing, 5))
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace %s: %v", ns, err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, eventTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s still there %s after its deletion: %v", ns, eventTimeout, err)
	}

	// Every object listed, and every object the relay ever published (a Pod replaced before
	// the list, say), must have its DELETED.
	rec.Wait(t, "a DELETED event for every object of the namespace", eventTimeout, func(events []relaytest.Event) (bool, string) {
		all := make(map[string]string, len(existing))
		for uid, what := range existing {
			all[uid] = what
		}
		for _, e := range events {
			all[e.UID] = e.Resource + " " + e.Name
		}
		missing := missingUIDs(all, events, func(e relaytest.Event) bool { return e.Type == event.Deleted })
		return len(missing) == 0, fmt.Sprintf("%d of %d objects without a DELETED event, e.g. %v", len(missing), len(all), first(missing, 5))
	})
	rec.CheckOrder(t)

	deleted := make(map[string]int)
	for _, e := range rec.Events() {
		if e.Type == event.Deleted {
			deleted[e.Resource]++
		}
	}
	t.Logf("DELETED events by resource: %v (listed before the deletion: %v)", deleted, count)
}

// missingUIDs returns the descriptions of the objects in want (by uid) that no event matching
// keep is about, sorted.
func missingUIDs(want map[string]string, events []relaytest.Event, keep func(relaytest.Event) bool) []string {
	seen := make(map[string]bool)
	for _, e := range events {
		if keep(e) {
			seen[e.UID] = true
		}
	}
	var missing []string
	for uid, what := range want {
		if !seen[uid] {
			missing = append(missing, what)
		}
	}
	slices.Sort(missing)
	return missing
}

// first returns at most n elements of s.
func first(s []string, n int) []string { return s[:min(n, len(s))] }

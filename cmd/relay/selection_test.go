package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// createConfigMap creates a ConfigMap with labels and data, failing the test on error.
func createConfigMap(t *testing.T, cs kubernetes.Interface, ns, name string, labels, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

// labelNamespace sets the labels of namespace ns.
func labelNamespace(t *testing.T, cs kubernetes.Interface, ns string, labels map[string]string) {
	t.Helper()
	n, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = labels
	if _, err := cs.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label namespace %s: %v", ns, err)
	}
}

// keysOf lists the namespace/name of every message, in order.
func keysOf(msgs []received) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Meta.Namespace + "/" + m.Meta.Name + ":" + string(m.Meta.Type)
	}
	return out
}

// hasKey reports whether a message of the object ns/name with type t was received.
func hasKey(msgs []received, ns, name string, t event.Type) bool {
	return slices.Contains(keysOf(msgs), ns+"/"+name+":"+string(t))
}

// TestNamespaceSelectionExcludesAndFollowsLabels relays ConfigMaps of every namespace with
// a namespace label selector and an excluded namespace: objects of unlabelled and excluded
// namespaces stay out; a namespace labelled after the start has its existing objects
// published at once and its changes from then on.
func TestNamespaceSelectionExcludesAndFollowsLabels(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	cs := kubeClient(t)
	selected, excluded, later := name+"-a", name+"-b", name+"-c"
	sel := map[string]string{"relay-test": name}
	for _, ns := range []string{selected, excluded, later} {
		createNamespace(t, cs, ns)
	}
	labelNamespace(t, cs, selected, sel)
	labelNamespace(t, cs, excluded, sel)
	createConfigMap(t, cs, later, "before-label", nil, nil)

	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACE_SELECTOR"] = "relay-test=" + name
	vars["RELAY_EXCLUDE_NAMESPACES"] = excluded
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)

	createConfigMap(t, cs, excluded, "excluded", nil, nil)
	createConfigMap(t, cs, later, "unselected", nil, nil)
	createConfigMap(t, cs, selected, "marker-1", nil, nil)
	msgs := waitFor(t, js, stream, "marker-1", func(m []received) bool { return hasKey(m, selected, "marker-1", event.Added) })
	for _, m := range msgs {
		if m.Meta.Namespace == excluded || m.Meta.Namespace == later {
			t.Fatalf("got an event of an unselected namespace: %s", m.Subject)
		}
	}

	// Labelling the namespace selects it: its objects are announced, then its changes flow.
	labelNamespace(t, cs, later, sel)
	msgs = waitFor(t, js, stream, "objects of the newly selected namespace", func(m []received) bool {
		return hasKey(m, later, "before-label", event.Added) && hasKey(m, later, "unselected", event.Added)
	})
	createConfigMap(t, cs, later, "after-label", nil, nil)
	msgs = waitFor(t, js, stream, "a change in the newly selected namespace", func(m []received) bool {
		return hasKey(m, later, "after-label", event.Added)
	})
	// Unlabelling stops its changes; deleting an object published before still tells
	// consumers it is gone. (The namespace and ConfigMap watches are separate streams: wait
	// until the relay has seen the label go before making the change.)
	labelNamespace(t, cs, later, nil)
	waitOutputCount(t, r, `"namespace_changed":"`+later+`"`, 3) // created, labelled, unlabelled
	createConfigMap(t, cs, later, "after-unlabel", nil, nil)
	if err := cs.CoreV1().ConfigMaps(later).Delete(ctx, "before-label", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, cs, selected, "marker-2", nil, nil)
	msgs = waitFor(t, js, stream, "marker-2 and the delete", func(m []received) bool {
		return hasKey(m, selected, "marker-2", event.Added) && hasKey(m, later, "before-label", event.Deleted)
	})
	for _, m := range msgs {
		switch {
		case m.Meta.Namespace == excluded:
			t.Errorf("got an event of the excluded namespace: %s", m.Subject)
		case m.Meta.Namespace == later && m.Meta.Name == "after-unlabel":
			t.Errorf("got an event of an object created after its namespace was unselected: %s", m.Subject)
		case m.Meta.Namespace == later && m.Meta.Name == "before-label" && m.Meta.Type == event.Added && m.Meta.Origin != event.Relist:
			t.Errorf("got %s with origin %s, want %s (caught up from a list)", m.Subject, m.Meta.Origin, event.Relist)
		}
	}
	r.stop(t)
}

// waitOutputCount waits until the relay's output holds want at least n times.
func waitOutputCount(t *testing.T, r *relayProc, want string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Count(r.Output(), want) >= n, nil
	})
	if err != nil {
		t.Fatalf("relay output never showed %q %d times:\n%s", want, n, r.Output())
	}
}

// TestNamespaceSelectorWithinListedNamespaces combines a namespace list (apiserver side) with a
// namespace selector: a matching namespace outside the list is not relayed, not even when
// it is labelled while the relay runs.
func TestNamespaceSelectorWithinListedNamespaces(t *testing.T) {
	name := testName(t)
	cs := kubeClient(t)
	listed, other := name+"-a", name+"-b"
	createNamespace(t, cs, listed)
	createNamespace(t, cs, other)
	sel := map[string]string{"relay-test": name}
	labelNamespace(t, cs, listed, sel)
	createConfigMap(t, cs, other, "outside", nil, nil)
	vars := relayVars(name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(`
resources:
  - resource: configmaps
    namespaces: [%s]
    namespaceSelector: "relay-test=%s"
`, listed, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	labelNamespace(t, cs, other, sel)
	waitOutputCount(t, r, `"namespace_changed":"`+other+`"`, 2) // created, labelled
	createConfigMap(t, cs, other, "outside-later", nil, nil)
	createConfigMap(t, cs, listed, "marker", nil, nil)
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "marker", func(m []received) bool { return hasKey(m, listed, "marker", event.Added) })
	for _, m := range msgs {
		if m.Meta.Namespace == other {
			t.Errorf("got an event of a namespace outside the list: %s", m.Subject)
		}
	}
	r.stop(t)
}

// TestServerSideSelectorsFromRulesFile checks a rule's label selector, field selector,
// namespace list and event types.
func TestServerSideSelectorsFromRulesFile(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	cs := kubeClient(t)
	in, out := name+"-in", name+"-out"
	createNamespace(t, cs, in)
	createNamespace(t, cs, out)
	rules := writeRules(t, fmt.Sprintf(`
resources:
  - resource: configmaps
    namespaces: [%s]
    labelSelector: "keep=yes"
    fieldSelector: "metadata.name!=skipped"
    events: [added, deleted]
`, in))
	vars := relayVars(name)
	vars["RELAY_RULES_FILE"] = rules
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)

	keep := map[string]string{"keep": "yes"}
	createConfigMap(t, cs, in, "unlabelled", nil, nil)
	createConfigMap(t, cs, in, "skipped", keep, nil)
	createConfigMap(t, cs, out, "elsewhere", keep, nil)
	cm := createConfigMap(t, cs, in, "kept", keep, map[string]string{"v": "1"})
	cm.Data["v"] = "2" // a modification: not among the event types
	if _, err := cs.CoreV1().ConfigMaps(in).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(in).Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "kept added and deleted", func(m []received) bool {
		return hasKey(m, in, "kept", event.Deleted)
	})
	if got, want := keysOf(msgs), []string{in + "/kept:added", in + "/kept:deleted"}; !slices.Equal(got, want) {
		t.Fatalf("got events %q, want %q", got, want)
	}
	r.stop(t)
}

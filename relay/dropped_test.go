package relay

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// scriptedLabelRules select the namespaces labelled relay=yes.
type scriptedLabelRules struct{}

func (scriptedLabelRules) Namespace(_ string, labels map[string]string) bool {
	return labels["relay"] == "yes"
}

// namespaceObject is a Namespace as the label tracker receives it.
func scriptedNamespace(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func TestDroppedNamespacesStayBoundedUnderNamespaceChurn(t *testing.T) {
	const churn = 10000
	ctx := context.Background()
	ns := NewNamespaces(nil)
	s := newScriptedIntake(t, &scriptedReader{watches: make(chan watch.Interface)}, defaultRules{})
	s.in.src.nsRules, s.in.src.namespaces = scriptedLabelRules{}, ns
	s.in.dropped = make(map[string]bool)
	unselected := map[string]string{"relay": "no"}

	// A namespace that lives on, with a dropped change: it must stay recorded, so that it is
	// caught up should its labels flap back to selected.
	ns.set(scriptedNamespace("lasting", unselected))
	if err := s.in.offer(ctx, object{Unstructured: scriptedConfigMap("lasting", "cm", "uid-l", "1", "x")}, event.Added, event.Live, "", false); err != nil {
		t.Fatal(err)
	}
	largest := 0
	for i := range churn {
		name := fmt.Sprintf("ns-%d", i)
		ns.set(scriptedNamespace(name, unselected))
		obj := object{Unstructured: scriptedConfigMap(name, "cm", fmt.Sprintf("uid-%d", i), fmt.Sprint(i+2), "x")}
		if err := s.in.offer(ctx, obj, event.Added, event.Live, "", false); err != nil {
			t.Fatal(err)
		}
		ns.remove(scriptedNamespace(name, nil))
		largest = max(largest, len(s.in.dropped))
	}
	if limit := 2 * droppedPruneMin; largest > limit {
		t.Errorf("dropped namespaces: got up to %d after %d namespaces created and deleted, want at most %d", largest, churn, limit)
	}
	if !s.in.dropped["lasting"] {
		t.Errorf("dropped namespaces: the namespace that still exists was forgotten")
	}
	if len(s.out) != 0 {
		t.Errorf("got %d items queued, want none: every change was of an unselected namespace", len(s.out))
	}
}

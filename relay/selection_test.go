package relay

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestDeleteOfAnObjectStillThereIsMarkedAsLeavingTheSelection(t *testing.T) {
	// What a read by name finds after the delete: a and d are still there with their uid (they
	// left the selection), c was re-created under another uid, b and e are gone.
	current := map[string]*unstructured.Unstructured{
		"a": scriptedConfigMap("ns", "a", "uid-a", "30", "x"),
		"c": scriptedConfigMap("ns", "c", "uid-c2", "31", "x"),
		"d": scriptedConfigMap("ns", "d", "uid-d", "32", "x"),
	}
	tests := []struct {
		name     string
		selector string
		// left lists the objects whose delete carries the mark.
		left string
	}{
		{name: "a source with a label selector tells which objects left it", selector: "app!=skip", left: "a,d"},
		{name: "a source without selector reads nothing and marks nothing", selector: "", left: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reads atomic.Int32
			r := &scriptedReader{watches: make(chan watch.Interface, 2)}
			r.list = func(call int, opts metav1.ListOptions) (*page, error) {
				if name, ok := strings.CutPrefix(opts.FieldSelector, "metadata.name="); ok {
					reads.Add(1)
					if opts.LabelSelector != "" {
						t.Errorf("read by name with label selector %q, want none", opts.LabelSelector)
					}
					if cm, ok := current[name]; ok {
						return scriptedPage("40", "", cm), nil
					}
					return scriptedPage("40", ""), nil
				}
				if opts.LabelSelector != tt.selector {
					t.Errorf("list with label selector %q, want %q", opts.LabelSelector, tt.selector)
				}
				if call == 1 {
					var objs []*unstructured.Unstructured
					for i, n := range []string{"a", "b", "c", "d", "e"} {
						objs = append(objs, scriptedConfigMap("ns", n, "uid-"+n, fmt.Sprint(i+1), "x"))
					}
					return scriptedPage("10", "", objs...), nil
				}
				return scriptedPage("20", ""), nil // the relist: d and e are no longer selected
			}
			r.watches <- scriptedWatch(
				watch.Event{Type: watch.Deleted, Object: scriptedConfigMap("ns", "a", "uid-a", "11", "x")},
				watch.Event{Type: watch.Deleted, Object: scriptedConfigMap("ns", "b", "uid-b", "12", "x")},
				watch.Event{Type: watch.Deleted, Object: scriptedConfigMap("ns", "c", "uid-c", "13", "x")},
				scriptedTooOld("13"),
			)
			s := newScriptedIntake(t, r, defaultRules{})
			s.in.src.cfg.LabelSelector = tt.selector
			got := s.run(t, "", 10)

			var left []string
			for _, g := range got[5:] {
				if g.meta.Type != event.Deleted {
					t.Fatalf("got %s, want deletes after the initial sync", g)
				}
				if g.header[event.HeaderLeftSelection] != nil {
					left = append(left, g.meta.Name)
					if v := g.header[event.HeaderLeftSelection]; len(v) != 1 || v[0] != "true" {
						t.Errorf("%s: got %s %q, want \"true\"", g, event.HeaderLeftSelection, v)
					}
				}
				if inferred := g.meta.Name == "d" || g.meta.Name == "e"; inferred != (g.meta.Origin == event.Relist) ||
					inferred != (g.header[event.HeaderFinalStateUnknown] != nil) {
					t.Errorf("%s: got origin %s, %s %q", g, g.meta.Origin, event.HeaderFinalStateUnknown, g.header[event.HeaderFinalStateUnknown])
				}
			}
			slices.Sort(left)
			if got := strings.Join(left, ","); got != tt.left {
				t.Errorf("deletes marked as leaving the selection: got %q, want %q", got, tt.left)
			}
			if tt.selector == "" && reads.Load() != 0 {
				t.Errorf("got %d reads by name, want none without a selector", reads.Load())
			}
			if _, indexed := s.in.index.get("ns/a"); indexed {
				t.Errorf("index: still holds ns/a, which left the selection")
			}
		})
	}
}

func TestFailedReadAfterADeleteReopensTheWatchBeforeIt(t *testing.T) {
	var reads atomic.Int32
	r := &scriptedReader{watches: make(chan watch.Interface, 2)}
	r.list = func(call int, opts metav1.ListOptions) (*page, error) {
		if opts.FieldSelector == "" && call == 1 {
			return scriptedPage("10", "", scriptedConfigMap("ns", "a", "uid-a", "5", "x"), scriptedConfigMap("ns", "b", "uid-b", "6", "x")), nil
		}
		if opts.FieldSelector == "" {
			// The read of the cluster's resourceVersion before a re-watch (see checkResume):
			// the cluster is past both changes the watch delivered.
			return scriptedPage("40", ""), nil
		}
		if reads.Add(1) == 1 {
			return nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
		}
		return scriptedPage("40", "", scriptedConfigMap("ns", "a", "uid-a", "30", "x")), nil
	}
	// The first watch delivers a change of b, then the delete of a, whose read fails; the
	// apiserver delivers that delete again to a watch from b's change.
	deleteA := watch.Event{Type: watch.Deleted, Object: scriptedConfigMap("ns", "a", "uid-a", "12", "x")}
	r.watches <- scriptedWatch(watch.Event{Type: watch.Modified, Object: scriptedConfigMap("ns", "b", "uid-b", "11", "y")}, deleteA)
	r.watches <- scriptedWatch(deleteA)
	s := newScriptedIntake(t, r, defaultRules{})
	s.in.src.cfg.LabelSelector = "app!=skip"
	got := s.run(t, "", 4)

	if g := got[3]; g.meta.Type != event.Deleted || g.meta.Name != "a" || g.header[event.HeaderLeftSelection] == nil {
		t.Errorf("got %s (%s %q), want the delete of a, marked as leaving the selection", g, event.HeaderLeftSelection, g.header[event.HeaderLeftSelection])
	}
	r.mu.Lock()
	from := r.watchedFrom
	r.mu.Unlock()
	if len(from) < 2 || from[0] != "10" || from[1] != "11" {
		t.Errorf("watches from: got %v, want [10 11 ...]: the second from the change before the delete", from)
	}
	for _, g := range got[:3] {
		if g.meta.Type == event.Deleted {
			t.Errorf("got %s before the read succeeded", g)
		}
	}
}

// budgetedScriptedReader is a scriptedReader whose list pages take from a budget, as a
// rawReader's do.
type budgetedScriptedReader struct {
	*scriptedReader
	budget *Budget
}

func (r budgetedScriptedReader) listBudget() *Budget { return r.budget }

func TestReadAfterADeleteTakesNothingFromTheBudget(t *testing.T) {
	// The read by name returns at most one object. Reserving a list page's share for it would
	// make every delete of a source with a selector wait for that share; with a small budget
	// (a page's estimate larger than the whole budget) until nothing at all is held.
	b := NewBudget(1 << 30)
	var usedAtRead atomic.Int64
	r := &scriptedReader{watches: make(chan watch.Interface)}
	r.list = func(_ int, opts metav1.ListOptions) (*page, error) {
		usedAtRead.Store(b.Used())
		return scriptedPage("40", "", scriptedConfigMap("ns", "a", "uid-a", "30", "x")), nil
	}
	s := newScriptedIntake(t, r, defaultRules{})
	s.in.src.cfg.LabelSelector = "app!=skip"
	s.in.src.budget = b
	s.in.src.nsClient = func(string) reader { return budgetedScriptedReader{r, b} }

	left, err := s.in.leftSelection(t.Context(), object{Unstructured: scriptedConfigMap("ns", "a", "uid-a", "12", "x")})
	if err != nil || !left {
		t.Fatalf("leftSelection: got %t, %v, want true, nil", left, err)
	}
	if got := usedAtRead.Load(); got != 0 {
		t.Errorf("budget held during the read by name: got %d bytes, want 0", got)
	}
	if got := b.Used(); got != 0 {
		t.Errorf("budget held after the read: got %d bytes, want 0", got)
	}
}

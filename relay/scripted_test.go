package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// scriptedReader is a reader whose lists and watches a test scripts, like client-go's
// reflector tests drive a ListWatch of funcs: list answers each List (calls counts them), and
// each Watch takes the next watcher from watches, waiting for it.
type scriptedReader struct {
	list    func(call int, opts metav1.ListOptions) (*page, error)
	watches chan watch.Interface
	// clusterRV, when set, answers the one-object reads of the cluster's resourceVersion
	// (see Source.clusterRV) without calling list, and without counting them as calls.
	clusterRV string
	// watchErr, when set, answers the Watch request of the given call (counted from 1)
	// with an error instead of a watcher: nil lets the call take one from watches.
	watchErr func(call int) error
	// listNamespace, when set, answers the lists of one namespace (namespace catch-up, reads
	// by name), which go through the reader inNamespace returns; otherwise List does.
	listNamespace func(ns string, opts metav1.ListOptions) (*page, error)

	mu    sync.Mutex
	calls int
	// watchedFrom lists the resourceVersion of every Watch, in order.
	watchedFrom []string
	// listed lists the options of every List that list answered, in order.
	listed []metav1.ListOptions
}

func (r *scriptedReader) List(_ context.Context, opts metav1.ListOptions) (*page, error) {
	if r.clusterRV != "" && opts.Limit == 1 && opts.Continue == "" && opts.ResourceVersion == "" {
		return &page{ResourceVersion: r.clusterRV}, nil
	}
	r.mu.Lock()
	r.calls++
	call := r.calls
	r.listed = append(r.listed, opts)
	r.mu.Unlock()
	return r.list(call, opts)
}

func (r *scriptedReader) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	r.mu.Lock()
	r.watchedFrom = append(r.watchedFrom, opts.ResourceVersion)
	call := len(r.watchedFrom)
	r.mu.Unlock()
	if r.watchErr != nil {
		if err := r.watchErr(call); err != nil {
			return nil, err
		}
	}
	select {
	case w := <-r.watches:
		return w, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// watched returns the resourceVersions of every Watch so far, in order.
func (r *scriptedReader) watched() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.watchedFrom...)
}

// lists returns the options of every List list answered so far, in order.
func (r *scriptedReader) lists() []metav1.ListOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]metav1.ListOptions(nil), r.listed...)
}

// inNamespace is the reader of namespace ns: its lists go to listNamespace.
func (r *scriptedReader) inNamespace(ns string) reader { return namespaceReader{r: r, ns: ns} }

// namespaceReader reads one namespace of a scriptedReader's resource.
type namespaceReader struct {
	r  *scriptedReader
	ns string
}

func (n namespaceReader) List(ctx context.Context, opts metav1.ListOptions) (*page, error) {
	if n.r.listNamespace == nil {
		return n.r.List(ctx, opts)
	}
	return n.r.listNamespace(n.ns, opts)
}

func (n namespaceReader) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, fmt.Errorf("unscripted watch of namespace %s", n.ns)
}

// stoppableWatch is a watch whose events a test sends while it is open, as the apiserver
// streams them: an event not yet read when the watch is stopped is lost with it, as with a
// closed connection. Stop returns once the result channel is closed.
type stoppableWatch struct {
	events  chan watch.Event
	result  chan watch.Event
	stopped chan struct{}
	closed  chan struct{}
	once    sync.Once
}

// newStoppableWatch returns an open watch that will deliver events, in order, once read; the
// test's cleanup stops it.
func newStoppableWatch(t *testing.T, events ...watch.Event) *stoppableWatch {
	w := &stoppableWatch{events: make(chan watch.Event, 100), result: make(chan watch.Event),
		stopped: make(chan struct{}), closed: make(chan struct{})}
	for _, ev := range events {
		w.events <- ev
	}
	go func() {
		defer close(w.closed)
		defer close(w.result)
		for {
			select {
			case <-w.stopped:
				return
			case ev := <-w.events:
				select {
				case w.result <- ev:
				case <-w.stopped:
					return
				}
			}
		}
	}()
	t.Cleanup(w.Stop)
	return w
}

func (w *stoppableWatch) Stop() {
	w.once.Do(func() { close(w.stopped) })
	<-w.closed
}

func (w *stoppableWatch) ResultChan() <-chan watch.Event { return w.result }

// send queues ev for delivery.
func (w *stoppableWatch) send(ev watch.Event) { w.events <- ev }

// isStopped reports whether the watch was stopped.
func (w *stoppableWatch) isStopped() bool {
	select {
	case <-w.stopped:
		return true
	default:
		return false
	}
}

// configMap is a ConfigMap of namespace ns with one data value.
func scriptedConfigMap(ns, name, uid, rv, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"v": value}}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	return u
}

// listOf is a list page holding objs at resourceVersion rv; cont is its continue token.
func scriptedPage(rv, cont string, objs ...*unstructured.Unstructured) *page {
	p := &page{ResourceVersion: rv, Continue: cont}
	for _, o := range objs {
		p.Items = append(p.Items, object{Unstructured: o})
	}
	return p
}

// tooOld is the watch event the apiserver sends when a watch starts from a resourceVersion
// that has left its history.
func scriptedTooOld(rv string) watch.Event {
	return watch.Event{Type: watch.Error, Object: &metav1.Status{
		Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
		Message: fmt.Sprintf("too old resource version: %s (%s)", rv, "100"),
	}}
}

// scriptedWatch is a watch that delivers events, then stays open.
func scriptedWatch(events ...watch.Event) watch.Interface {
	w := watch.NewRaceFreeFake()
	for _, ev := range events {
		switch ev.Type {
		case watch.Error:
			w.Error(ev.Object)
		case watch.Added:
			w.Add(ev.Object)
		case watch.Modified:
			w.Modify(ev.Object)
		case watch.Deleted:
			w.Delete(ev.Object)
		}
	}
	return w
}

// scriptedObjectAndOldRules publish every change with the payload objectAndOld, as the filter
// package's rules do for `payload: objectAndOld`.
type scriptedObjectAndOldRules struct{}

func (scriptedObjectAndOldRules) NeedsOld() bool                          { return true }
func (scriptedObjectAndOldRules) Shape(obj map[string]any) map[string]any { return obj }
func (scriptedObjectAndOldRules) Decide(Change) Verdict                   { return Verdict{Publish: true} }
func (scriptedObjectAndOldRules) Body(obj, old map[string]any) ([]byte, event.Payload, error) {
	b, err := json.Marshal(map[string]any{"object": obj, "oldObject": old})
	return b, event.PayloadObjectAndOld, err
}

// scriptedIntake is an intake of ConfigMaps reading through r, with its items collected.
type scriptedIntake struct {
	in  *intake
	out chan *item
}

// newScriptedIntake is newTestIntake on the real clock: the tests that run it wait out the
// intake's retry backoffs (200ms at most after a first failure) instead of stepping a clock.
func newScriptedIntake(t *testing.T, r *scriptedReader, rules Rules) *scriptedIntake {
	ti := newTestIntake(t, r, withRules(rules))
	ti.in.src.clock = clock.RealClock{}
	return &scriptedIntake{in: ti.in, out: ti.out}
}

// queued is one event an intake queued.
type queued struct {
	meta   event.Meta
	header map[string][]string
	body   map[string]any
}

func (p queued) String() string {
	return fmt.Sprintf("%s %s/%s rv=%s origin=%s", p.meta.Type, p.meta.Namespace, p.meta.Name, p.meta.ResourceVersion, p.meta.Origin)
}

// run runs the intake from checkpoint rv until it has queued n events, and returns them.
func (s *scriptedIntake) run(t *testing.T, rv string, n int) []queued {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.in.run(ctx, rv) }()
	defer func() { cancel(); <-done }()
	var got []queued
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case it := <-s.out:
			if it.msg == nil {
				continue // a checkpoint mark, or an index record only
			}
			m, err := event.MetaFromHeader(it.msg.Header)
			if err != nil {
				t.Fatalf("event on %s: %v", it.msg.Subject, err)
			}
			p := queued{meta: m, header: it.msg.Header}
			if err := json.Unmarshal(it.msg.Data, &p.body); err != nil {
				t.Fatalf("event %s: body: %v", p, err)
			}
			got = append(got, p)
		case <-deadline:
			t.Fatalf("got %d events, want %d: %v", len(got), n, got)
		}
	}
	return got
}

func TestRelistChangesCarryNoPreviousState(t *testing.T) {
	r := &scriptedReader{watches: make(chan watch.Interface, 2)}
	r.list = func(call int, _ metav1.ListOptions) (*page, error) {
		if call == 1 {
			return scriptedPage("10", "", scriptedConfigMap("ns", "a", "uid-a", "5", "one")), nil
		}
		// The relist after the 410: a changed twice meanwhile (nobody saw "two" at 12).
		return scriptedPage("20", "", scriptedConfigMap("ns", "a", "uid-a", "15", "three"), scriptedConfigMap("ns", "b", "uid-b", "16", "new")), nil
	}
	r.watches <- scriptedWatch(
		watch.Event{Type: watch.Modified, Object: scriptedConfigMap("ns", "a", "uid-a", "11", "two")},
		scriptedTooOld("11"),
	)
	s := newScriptedIntake(t, r, scriptedObjectAndOldRules{})
	got := s.run(t, "", 4)

	want := []struct {
		typ    event.Type
		origin event.Origin
		old    any // data.v of oldObject; nil for null
	}{
		{event.Added, event.InitialSync, nil},
		{event.Modified, event.Live, "one"}, // the cache works on a live watch
		{event.Modified, event.Relist, nil}, // the relist after the 410: the state seen last ("two") is not the previous one
		{event.Added, event.Relist, nil},
	}
	for i, w := range want {
		g := got[i]
		if g.meta.Type != w.typ || g.meta.Origin != w.origin {
			t.Fatalf("event %d: got %s, want %s with origin %s; all: %v", i, g, w.typ, w.origin, got)
		}
		var old any
		if o, ok := g.body["oldObject"].(map[string]any); ok {
			old = bodyField(o, "data", "v")
		} else if g.body["oldObject"] != nil {
			t.Fatalf("event %d (%s): oldObject %v is neither an object nor null", i, g, g.body["oldObject"])
		}
		if old != w.old {
			t.Errorf("event %d (%s): got oldObject with data.v %v, want %v", i, g, old, w.old)
		}
	}
}

func TestInitialSyncPublishesOnlyAdded(t *testing.T) {
	tests := []struct {
		name string
		// index is what the durable index holds at the start (there is no checkpoint).
		index map[string]entry
		list  func(call int, opts metav1.ListOptions) (*page, error)
		// want lists the events, in order, as type/name/origin.
		want []string
	}{
		{
			name: "a list restarted after its continue token expired",
			list: func(call int, opts metav1.ListOptions) (*page, error) {
				switch {
				case call == 1:
					return scriptedPage("10", "token", scriptedConfigMap("ns", "a", "uid-a", "5", "one"), scriptedConfigMap("ns", "b", "uid-b", "6", "one")), nil
				case opts.Continue == "token":
					return nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
				}
				return scriptedPage("30", "", scriptedConfigMap("ns", "a", "uid-a", "25", "two"), scriptedConfigMap("ns", "b", "uid-b", "6", "one"),
					scriptedConfigMap("ns", "c", "uid-c", "26", "one")), nil
			},
			want: []string{"added/a/initial-sync", "added/b/initial-sync", "modified/a/relist", "added/c/initial-sync"},
		},
		{
			name: "an index left by a run whose checkpoint is lost",
			index: map[string]entry{
				"ns/a": {UID: "uid-a", ResourceVersion: "5"},
				"ns/b": {UID: "uid-b", ResourceVersion: "6"},
				"ns/d": {UID: "uid-d", ResourceVersion: "7"},
				"ns/e": {UID: "uid-e-old", ResourceVersion: "8"},
			},
			list: func(int, metav1.ListOptions) (*page, error) {
				return scriptedPage("30", "", scriptedConfigMap("ns", "a", "uid-a", "25", "two"), scriptedConfigMap("ns", "b", "uid-b", "6", "one"),
					scriptedConfigMap("ns", "c", "uid-c", "26", "one"), scriptedConfigMap("ns", "e", "uid-e-new", "27", "one")), nil
			},
			want: []string{"modified/a/relist", "added/c/initial-sync", "deleted/e/relist", "added/e/relist", "deleted/d/relist"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptedReader{list: tt.list, watches: make(chan watch.Interface)}
			s := newScriptedIntake(t, r, defaultRules{})
			for k, e := range tt.index {
				s.in.index.put(k, e)
			}
			got := s.run(t, "", len(tt.want))
			for i, g := range got {
				if g.meta.Origin == event.InitialSync && g.meta.Type != event.Added {
					t.Errorf("event %d: got %s, want initial-sync events of type added only", i, g)
				}
				if s := fmt.Sprintf("%s/%s/%s", g.meta.Type, g.meta.Name, g.meta.Origin); s != tt.want[i] {
					t.Errorf("event %d: got %s, want %s", i, s, tt.want[i])
				}
			}
		})
	}
}

// bodyField reads a nested field of a decoded body, nil when it is absent.
func bodyField(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

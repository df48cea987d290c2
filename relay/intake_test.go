package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// intakeWait bounds every wait of the intake tests for something the intake does: they pass
// in milliseconds, the bound only keeps a broken intake from hanging the run.
const intakeWait = 10 * time.Second

// testIntake is an intake of ConfigMaps reading through a scriptedReader, with a fake clock
// and its items collected on out, which nobody else reads.
type testIntake struct {
	in    *intake
	r     *scriptedReader
	out   chan *item
	clock *clocktesting.FakeClock
	notes *recordingObserver
}

// intakeSetup is what the options of newTestIntake set.
type intakeSetup struct {
	buffer      int
	initialSync bool
	rules       Rules
	index       map[string]entry
	nsRules     NamespaceRules
	namespaces  *Namespaces
}

// intakeOption changes the setup of newTestIntake.
type intakeOption func(*intakeSetup)

// withBuffer makes the intake's buffer hold n items.
func withBuffer(n int) intakeOption { return func(s *intakeSetup) { s.buffer = n } }

// withoutInitialSync makes the source skip publishing its initial sync.
func withoutInitialSync() intakeOption { return func(s *intakeSetup) { s.initialSync = false } }

// withRules makes the source filter and shape changes with r.
func withRules(r Rules) intakeOption { return func(s *intakeSetup) { s.rules = r } }

// withIndexed starts the intake with the object index holding entries (namespace/name to
// uid and resourceVersion), as loaded from the durable index.
func withIndexed(entries map[string]entry) intakeOption {
	return func(s *intakeSetup) { s.index = entries }
}

// withNamespaceSelection makes the source relay only the namespaces nr selects, by the
// labels ns holds.
func withNamespaceSelection(nr NamespaceRules, ns *Namespaces) intakeOption {
	return func(s *intakeSetup) { s.nsRules, s.namespaces = nr, ns }
}

// newTestIntake builds the intake under test: every intake test builds it here, so that a
// change of how sources are built touches only this function.
func newTestIntake(t *testing.T, r *scriptedReader, opts ...intakeOption) *testIntake {
	t.Helper()
	setup := intakeSetup{buffer: 100, initialSync: true, rules: defaultRules{}}
	for _, o := range opts {
		o(&setup)
	}
	notes := &recordingObserver{}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := &Source{
		cfg: SourceConfig{Cluster: "c", Prefix: "kube", InitialSync: setup.initialSync, Resource: Resource{
			GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Kind:                 "ConfigMap", Namespaced: true,
		}},
		client: r, index: newIndex(), clock: clock, rules: setup.rules, obs: notes,
		nsRules: setup.nsRules, namespaces: setup.namespaces, nsClient: r.inNamespace,
	}
	for k, e := range setup.index {
		src.index.put(k, e)
	}
	out := make(chan *item, setup.buffer)
	in := &intake{src: src, out: out, index: src.index, log: zerolog.Nop()}
	return &testIntake{in: in, r: r, out: out, clock: clock, notes: notes}
}

// start runs the intake from checkpoint rv (empty: none) until the test ends.
func (ti *testIntake) start(t *testing.T, rv string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ti.in.run(ctx, rv) }()
	t.Cleanup(func() { cancel(); <-done })
}

// take returns the next n items the intake queued, each as describeItem writes it.
func (ti *testIntake) take(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(intakeWait)
	for len(got) < n {
		select {
		case it := <-ti.out:
			got = append(got, describeItem(t, it))
		case <-timeout:
			t.Fatalf("got %d items, want %d: %q", len(got), n, got)
		}
	}
	return got
}

// next returns the next item the intake queued.
func (ti *testIntake) next(t *testing.T) *item {
	t.Helper()
	select {
	case it := <-ti.out:
		return it
	case <-time.After(intakeWait):
		t.Fatal("nothing queued")
		return nil
	}
}

// expect takes as many items as want holds and fails unless they are want, in order.
func (ti *testIntake) expect(t *testing.T, want ...string) {
	t.Helper()
	if got := ti.take(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("queued:\n got  %q\n want %q", got, want)
	}
}

// open hands w to the intake's next Watch and returns the resourceVersion it watches from.
func (ti *testIntake) open(t *testing.T, w watch.Interface) string {
	t.Helper()
	select {
	case ti.r.watches <- w:
	case <-time.After(intakeWait):
		t.Fatalf("no watch opened; watches so far from %q", ti.r.watched())
	}
	watched := ti.r.watched()
	return watched[len(watched)-1]
}

// noted returns how often the intake noted n.
func (ti *testIntake) noted(n Note) int {
	_, notes := ti.notes.snapshot()
	return notes[n]
}

// describeItem writes an item the way the intake tests expect them: an event as
// "<type> <namespace/name> <uid>@<rv> <origin>", followed by "final-state-unknown" for an
// inferred delete and by "ckpt <rv>" when it moves the checkpoint; a mark as
// "mark <rv>", followed by "urgent" when it asks for an immediate save.
func describeItem(t *testing.T, it *item) string {
	t.Helper()
	if it.msg == nil {
		s := "mark " + it.rv
		if it.urgent {
			s += " urgent"
		}
		return s
	}
	m, err := event.MetaFromHeader(it.msg.Header)
	if err != nil {
		t.Fatalf("event on %s: %v", it.msg.Subject, err)
	}
	s := fmt.Sprintf("%s %s/%s %s@%s %s", m.Type, m.Namespace, m.Name, m.UID, m.ResourceVersion, m.Origin)
	if it.msg.Header.Get(event.HeaderFinalStateUnknown) == "true" {
		s += " final-state-unknown"
	}
	if it.rv != "" {
		s += " ckpt " + it.rv
	}
	return s
}

// cm is a ConfigMap of namespace ns at resourceVersion rv.
func cm(ns, name, uid, rv string) *unstructured.Unstructured {
	return scriptedConfigMap(ns, name, uid, rv, rv)
}

// noList fails the test for any list but the reads of the cluster's resourceVersion.
func noList(t *testing.T) func(int, metav1.ListOptions) (*page, error) {
	return func(_ int, opts metav1.ListOptions) (*page, error) {
		t.Errorf("unexpected list %+v", opts)
		return nil, apierrors.NewInternalError(fmt.Errorf("unscripted list"))
	}
}

func TestIntakeInitialSyncPublishesOrRecordsEveryObject(t *testing.T) {
	// After the initial sync, the first watch gets a 410; the relist finds a unchanged, b
	// gone and c new. Published or skipped, the initial sync recorded a and b: the relist
	// announces neither a again nor misses b's delete.
	relisted := []string{
		"added ns/c uid-c@16 relist",
		"deleted ns/b uid-b@6 relist final-state-unknown",
		"mark 20 urgent",
	}
	tests := []struct {
		name        string
		initialSync bool
		// want is what the initial sync queues.
		want []string
	}{
		{
			name:        "publish",
			initialSync: true,
			want:        []string{"added ns/a uid-a@5 initial-sync", "added ns/b uid-b@6 initial-sync", "mark 10 urgent"},
		},
		{
			name:        "skip",
			initialSync: false,
			want:        []string{"mark 10 urgent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "20"}
			r.list = func(call int, opts metav1.ListOptions) (*page, error) {
				switch call {
				case 1:
					return scriptedPage("10", "page-2", cm("ns", "a", "uid-a", "5")), nil
				case 2:
					return scriptedPage("10", "", cm("ns", "b", "uid-b", "6")), nil
				}
				return scriptedPage("20", "", cm("ns", "a", "uid-a", "5"), cm("ns", "c", "uid-c", "16")), nil
			}
			var opts []intakeOption
			if !tt.initialSync {
				opts = append(opts, withoutInitialSync())
			}
			ti := newTestIntake(t, r, opts...)
			ti.start(t, "")
			ti.expect(t, tt.want...)
			if from := ti.open(t, newStoppableWatch(t, scriptedTooOld("10"))); from != "10" {
				t.Errorf("watch from %q, want the list's resourceVersion 10", from)
			}
			ti.expect(t, relisted...)

			lists := r.lists()
			if len(lists) != 3 || lists[0].ResourceVersion != "" || lists[0].Continue != "" || lists[1].Continue != "page-2" {
				t.Errorf("lists: got %+v, want a consistent read (no resourceVersion), its continuation and the relist", lists)
			}
			if n := ti.noted(NoteInitialSync); n != 1 {
				t.Errorf("initial syncs noted: got %d, want 1", n)
			}
		})
	}
}

func TestIntakeResumesFromTheCheckpointWithoutListing(t *testing.T) {
	r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "50"}
	r.list = noList(t)
	ti := newTestIntake(t, r, withIndexed(map[string]entry{"ns/a": {UID: "uid-a", ResourceVersion: "40"}}))
	ti.start(t, "42")
	if from := ti.open(t, newStoppableWatch(t,
		watch.Event{Type: watch.Modified, Object: cm("ns", "a", "uid-a", "43")},
		watch.Event{Type: watch.Added, Object: cm("ns", "b", "uid-b", "44")},
	)); from != "42" {
		t.Errorf("watch from %q, want the checkpoint 42", from)
	}
	ti.expect(t, "modified ns/a uid-a@43 live ckpt 43", "added ns/b uid-b@44 live ckpt 44")
	if n, m := ti.noted(NoteInitialSync), ti.noted(NoteRelist); n+m != 0 {
		t.Errorf("lists noted: %d initial syncs and %d relists, want none", n, m)
	}
}

func TestIntakeRelistsAfter410AndInfersDeletes(t *testing.T) {
	tests := []struct {
		name string
		// watchErr answers the Watch requests (see scriptedReader); when it lets the first
		// one through, that watch sends a 410 event.
		watchErr func(call int) error
	}{
		{name: "410 as a watch event"},
		{
			name: "410 answering the watch request",
			watchErr: func(call int) error {
				if call == 1 {
					return apierrors.NewResourceExpired("too old resource version: 10 (100)")
				}
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "20", watchErr: tt.watchErr}
			r.list = func(int, metav1.ListOptions) (*page, error) {
				// a changed and c appeared while nobody watched; b is gone.
				return scriptedPage("20", "", cm("ns", "a", "uid-a", "15"), cm("ns", "c", "uid-c", "16")), nil
			}
			ti := newTestIntake(t, r, withIndexed(map[string]entry{
				"ns/a": {UID: "uid-a", ResourceVersion: "5"},
				"ns/b": {UID: "uid-b", ResourceVersion: "6"},
			}))
			ti.start(t, "10")
			if tt.watchErr == nil {
				ti.open(t, newStoppableWatch(t, scriptedTooOld("10")))
			}
			ti.expect(t,
				"modified ns/a uid-a@15 relist",
				"added ns/c uid-c@16 relist",
				"deleted ns/b uid-b@6 relist final-state-unknown",
				"mark 20 urgent",
			)
			if from := ti.open(t, newStoppableWatch(t)); from != "20" {
				t.Errorf("watch after the relist from %q, want the relist's resourceVersion 20", from)
			}
			if got := r.watched(); got[0] != "10" {
				t.Errorf("first watch from %q, want the checkpoint 10", got[0])
			}
			if n := ti.noted(NoteExpired); n != 1 {
				t.Errorf("410s noted: got %d, want 1", n)
			}
			if n := ti.noted(NoteRelist); n != 1 {
				t.Errorf("relists noted: got %d, want 1", n)
			}
		})
	}
}

func TestIntakeRelistTurnsANewUIDIntoDeleteThenAdd(t *testing.T) {
	r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "20"}
	r.list = func(int, metav1.ListOptions) (*page, error) {
		// a was deleted and re-created under the same name while nobody watched.
		return scriptedPage("20", "", cm("ns", "a", "uid-a2", "12")), nil
	}
	ti := newTestIntake(t, r, withIndexed(map[string]entry{"ns/a": {UID: "uid-a1", ResourceVersion: "5"}}))
	ti.start(t, "10")
	ti.open(t, newStoppableWatch(t, scriptedTooOld("10")))
	ti.expect(t,
		"deleted ns/a uid-a1@5 relist final-state-unknown",
		"added ns/a uid-a2@12 relist",
		"mark 20 urgent",
	)
	if e, _ := ti.in.index.get("ns/a"); e != (entry{UID: "uid-a2", ResourceVersion: "12"}) {
		t.Errorf("index entry of ns/a: got %+v, want the new object's", e)
	}
}

func TestIntakeSuppressesReplaysTheIndexCovers(t *testing.T) {
	r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "50"}
	r.list = noList(t)
	// The index ran ahead of the checkpoint: a's change at 12 was published, the checkpoint
	// stayed at 10 (a crash before it was saved).
	ti := newTestIntake(t, r, withIndexed(map[string]entry{"ns/a": {UID: "uid-a", ResourceVersion: "12"}}))
	ti.start(t, "10")
	ti.open(t, newStoppableWatch(t,
		watch.Event{Type: watch.Modified, Object: cm("ns", "a", "uid-a", "11")},
		watch.Event{Type: watch.Modified, Object: cm("ns", "a", "uid-a", "12")},
		watch.Event{Type: watch.Modified, Object: cm("ns", "a", "uid-a", "13")},
	))
	ti.expect(t,
		"mark 11", // replays move the checkpoint only
		"mark 12",
		"modified ns/a uid-a@13 live ckpt 13",
	)
	if n := ti.noted(NoteReplaySuppressed); n != 2 {
		t.Errorf("replays suppressed: got %d, want 2", n)
	}
}

func TestIntakePrimesPreviousStatesOnResume(t *testing.T) {
	tests := []struct {
		name string
		// exact answers the list of the states at the checkpoint.
		exact func() (*page, error)
		// want is what the resumed watch's change of a carries as oldObject's data.v.
		want any
	}{
		{
			name: "the states at the checkpoint",
			exact: func() (*page, error) {
				return scriptedPage("10", "", scriptedConfigMap("ns", "a", "uid-a", "8", "one")), nil
			},
			want: "one",
		},
		{
			// Aggregated APIs may refuse exact reads: the first change then has no oldObject.
			name:  "a server refusing exact reads",
			exact: func() (*page, error) { return nil, apierrors.NewBadRequest("exact resourceVersion not supported") },
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "50"}
			r.list = func(_ int, opts metav1.ListOptions) (*page, error) {
				if opts.ResourceVersion != "10" || opts.ResourceVersionMatch != metav1.ResourceVersionMatchExact {
					t.Errorf("list %+v, want one of the states at the checkpoint 10, exactly", opts)
				}
				return tt.exact()
			}
			ti := newTestIntake(t, r, withRules(scriptedObjectAndOldRules{}))
			ti.start(t, "10")
			ti.open(t, newStoppableWatch(t, watch.Event{Type: watch.Modified, Object: scriptedConfigMap("ns", "a", "uid-a", "11", "two")}))
			it := ti.next(t)
			if it.msg == nil {
				t.Fatalf("got %s, want the change of a", describeItem(t, it))
			}
			var body struct{ OldObject map[string]any }
			if err := json.Unmarshal(it.msg.Data, &body); err != nil {
				t.Fatalf("body %s: %v", it.msg.Data, err)
			}
			if got := bodyField(body.OldObject, "data", "v"); got != tt.want {
				t.Errorf("oldObject data.v: got %v, want %v", got, tt.want)
			}
			if n := len(r.lists()); n != 1 {
				t.Errorf("lists: got %d, want 1: the read of the states at the checkpoint, and no relist", n)
			}
		})
	}
}

func TestIntakeCatchesUpOnANamespaceThatBecomesSelected(t *testing.T) {
	ns := NewNamespaces(nil)
	ns.set(scriptedNamespace("on", map[string]string{"relay": "yes"}))
	ns.set(scriptedNamespace("off", map[string]string{"relay": "no"}))
	close(ns.synced)

	r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "30"}
	r.list = func(int, metav1.ListOptions) (*page, error) {
		return scriptedPage("10", "", cm("on", "a", "uid-a", "5"), cm("off", "b", "uid-b", "6")), nil
	}
	r.listNamespace = func(namespace string, _ metav1.ListOptions) (*page, error) {
		if namespace != "off" {
			return nil, fmt.Errorf("list of namespace %s, want only off", namespace)
		}
		return scriptedPage("20", "", cm("off", "b", "uid-b", "6"), cm("off", "d", "uid-d", "18")), nil
	}
	ti := newTestIntake(t, r, withNamespaceSelection(scriptedLabelRules{}, ns))
	ti.start(t, "")
	ti.expect(t, "added on/a uid-a@5 initial-sync", "mark 10 urgent") // off/b is not selected
	w := newStoppableWatch(t)
	ti.open(t, w)

	ns.set(scriptedNamespace("off", map[string]string{"relay": "yes"}))
	ti.expect(t, "added off/b uid-b@6 relist", "added off/d uid-d@18 relist")
	if !w.isStopped() {
		t.Error("the watch stayed open during the catch-up")
	}
	if from := ti.open(t, newStoppableWatch(t)); from != "10" {
		t.Errorf("watch after the catch-up from %q, want where the last one stopped, 10", from)
	}
	if n := ti.noted(NoteFilteredNamespace); n != 1 {
		t.Errorf("changes filtered by namespace: got %d, want 1 (off/b in the initial sync)", n)
	}
}

func TestIntakeReleasesTheWatchWhenTheBufferStaysFull(t *testing.T) {
	r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "50"}
	r.list = noList(t)
	ti := newTestIntake(t, r, withBuffer(1))
	ti.start(t, "10")
	first := newStoppableWatch(t,
		watch.Event{Type: watch.Added, Object: cm("ns", "a", "uid-a", "11")},
		watch.Event{Type: watch.Added, Object: cm("ns", "b", "uid-b", "12")},
		watch.Event{Type: watch.Added, Object: cm("ns", "c", "uid-c", "13")},
	)
	ti.open(t, first)

	// a fills the buffer; b waits for room, on the stall timer.
	waitFor(t, "the stall timer", ti.clock.HasWaiters)
	if first.isStopped() {
		t.Fatal("watch released before the stall limit")
	}
	ti.clock.Step(watchStallLimit)
	waitFor(t, "the watch released", first.isStopped)

	// Draining the buffer lets b through; c, unread when the watch was released, comes from
	// the next watch, which resumes after b.
	ti.expect(t, "added ns/a uid-a@11 live ckpt 11", "added ns/b uid-b@12 live ckpt 12")
	if from := ti.open(t, newStoppableWatch(t, watch.Event{Type: watch.Added, Object: cm("ns", "c", "uid-c", "13")})); from != "12" {
		t.Errorf("next watch from %q, want 12, the last resourceVersion handed on", from)
	}
	ti.expect(t, "added ns/c uid-c@13 live ckpt 13")
}

func TestIntakeRetriesAFailedWatchAfterItsBackoff(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name string
		err  error
		// atLeast and atMost bound the wait before the retry (the transient one has jitter).
		atLeast, atMost time.Duration
		// permanent: the source reports the error while it waits.
		permanent bool
	}{
		{name: "transient", err: apierrors.NewServiceUnavailable("apiserver shutting down"),
			atLeast: watchBackoffMin * 3 / 4, atMost: watchBackoffMin},
		{name: "forbidden", err: apierrors.NewForbidden(gr, "", fmt.Errorf("RBAC")),
			atLeast: watchBackoffMax, atMost: watchBackoffMax, permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptedReader{watches: make(chan watch.Interface), clusterRV: "50"}
			r.list = noList(t)
			r.watchErr = func(call int) error {
				if call == 1 {
					return tt.err
				}
				return nil
			}
			ti := newTestIntake(t, r)
			ti.start(t, "10")
			waitFor(t, "the retry's backoff", ti.clock.HasWaiters)
			if ready, why := ti.in.src.Status(); ready || strings.Contains(why, ErrPermanent.Error()) != tt.permanent {
				t.Errorf("status while waiting: got ready=%v %q, want not ready, permanent error reported: %v", ready, why, tt.permanent)
			}
			ti.clock.Step(tt.atLeast - time.Nanosecond)
			if !ti.clock.HasWaiters() {
				t.Fatalf("retried within %s, want a wait of at least %s", tt.atLeast-time.Nanosecond, tt.atLeast)
			}
			ti.clock.Step(tt.atMost - tt.atLeast + time.Nanosecond)
			if from := ti.open(t, newStoppableWatch(t)); from != "10" {
				t.Errorf("retried watch from %q, want the checkpoint 10", from)
			}
		})
	}
}

// waitFor polls cond until it holds, failing the test after intakeWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, intakeWait, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waited %s for %s: %v", intakeWait, what, err)
	}
}

package relay

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// listRV is a reader whose lists answer only a resourceVersion, and records their options.
type listRV struct {
	rv   string
	opts []metav1.ListOptions
}

func (l *listRV) List(_ context.Context, opts metav1.ListOptions) (*page, error) {
	l.opts = append(l.opts, opts)
	return &page{ResourceVersion: l.rv}, nil
}

func (l *listRV) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("not watched in this test")
}

// countNotes counts the notes a source reports.
type countNotes map[Note]int

func (countNotes) Published(Publication) {}
func (c countNotes) Noted(n Note)        { c[n]++ }

func TestCheckResumeRelistsWhatIsAheadOfTheCluster(t *testing.T) {
	tests := []struct {
		name      string
		cluster   string
		rv        string
		newest    string
		wantAhead bool
	}{
		{"checkpoint behind the cluster", "1000", "900", "950", false},
		{"checkpoint at the cluster", "1000", "1000", "", false},
		{"checkpoint far ahead", "1000", "5001000", "", true},
		{"checkpoint ahead, longer string", "999", "1000", "", true},
		{"index ahead of the cluster", "1000", "900", "1200", true},
		{"non-integer checkpoint is not ordered", "1000", "abc", "", false},
		{"non-integer cluster is not ordered", "abc", "5001000", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := &listRV{rv: tt.cluster}
			notes := countNotes{}
			src := &Source{client: rd, obs: notes, cfg: SourceConfig{LabelSelector: "app=x", FieldSelector: "metadata.name=y",
				Resource: Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}}
			in := &intake{src: src, log: zerolog.Nop()}
			err := in.checkResume(context.Background(), tt.rv, "checkpoint_rv", tt.newest)
			if got := errors.Is(err, errAhead); got != tt.wantAhead {
				t.Errorf("ahead: got %v (%v), want %v", got, err, tt.wantAhead)
			}
			if !tt.wantAhead && err != nil {
				t.Errorf("got error %v, want none", err)
			}
			if got, want := notes[NoteAhead], map[bool]int{true: 1}[tt.wantAhead]; got != want {
				t.Errorf("NoteAhead: got %d, want %d", got, want)
			}
			if len(rd.opts) != 1 {
				t.Fatalf("lists: got %d, want 1", len(rd.opts))
			}
			if o := rd.opts[0]; o.Limit != 1 || o.ResourceVersion != "" || o.LabelSelector != "" || o.FieldSelector != "" {
				t.Errorf("list options: got %+v, want a consistent read of one object without selectors", o)
			}
		})
	}
}

func TestTooLargeResourceVersionIsRecognised(t *testing.T) {
	tooLarge := apierrors.NewTimeoutError("Too large resource version", 1)
	tooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"too large", tooLarge, true},
		{"too large, wrapped", errors.Join(errors.New("watch"), tooLarge), true},
		{"plain timeout", apierrors.NewTimeoutError("slow", 1), false},
		{"expired", apierrors.NewResourceExpired("too old"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isTooLarge(tt.err); got != tt.want {
				t.Errorf("isTooLarge(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// restoredCluster is a reader whose cluster resourceVersion the test moves; it reports each
// watch it opens and each full list it answers.
type restoredCluster struct {
	mu      sync.Mutex
	rv      string
	watches chan *watch.FakeWatcher
	lists   chan string
}

func (c *restoredCluster) setRV(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rv = rv
}

func (c *restoredCluster) List(_ context.Context, opts metav1.ListOptions) (*page, error) {
	c.mu.Lock()
	rv := c.rv
	c.mu.Unlock()
	if opts.Limit != 1 {
		c.lists <- rv
	}
	return &page{ResourceVersion: rv}, nil
}

func (c *restoredCluster) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	c.watches <- w
	return w, nil
}

func TestRewatchAfterAnEtcdRestoreRelists(t *testing.T) {
	cluster := &restoredCluster{rv: "100", watches: make(chan *watch.FakeWatcher, 1), lists: make(chan string, 1)}
	notes := countNotes{}
	src := &Source{client: cluster, obs: notes, rules: defaultRules{}, index: newIndex(), clock: clock.RealClock{},
		cfg: SourceConfig{Resource: Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}}
	out := make(chan *item, 16)
	in := &intake{src: src, out: out, index: src.index, log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.run(ctx, "100")
	}()
	defer func() { cancel(); <-done }()
	go func() {
		for { // the pipeline's side: take whatever intake hands on
			select {
			case <-out:
			case <-done:
				return
			}
		}
	}()

	select {
	case w := <-cluster.watches:
		// etcd restored from a backup at revision 40 while the relay watched: the apiserver
		// restarts, which ends the watch.
		cluster.setRV("40")
		w.Stop()
	case rv := <-cluster.lists:
		t.Fatalf("listed at %s before watching from a checkpoint the cluster has", rv)
	}
	select {
	case rv := <-cluster.lists:
		if rv != "40" {
			t.Errorf("relist at %s, want the restored cluster's 40", rv)
		}
	case w := <-cluster.watches:
		t.Fatalf("watched again (%v) from a resourceVersion ahead of the cluster instead of relisting", w)
	}
	cancel()
	<-done
	if notes[NoteAhead] != 1 {
		t.Errorf("NoteAhead: got %d, want 1", notes[NoteAhead])
	}
}

// scriptedWhenRules publish a change only when its data.v is "pub", as a rule's when
// expression does.
type scriptedWhenRules struct{ defaultRules }

func (scriptedWhenRules) Decide(c Change) Verdict {
	if bodyField(c.Object, "data", "v") == "pub" {
		return Verdict{Publish: true}
	}
	return Verdict{Reason: "when"}
}

func TestRelistForgetsAnIndexEntryAheadOfTheObjectEvenWhenItsChangeIsFiltered(t *testing.T) {
	// The index holds a at 5000, from a history the cluster no longer has (etcd restored,
	// same uids). The relist finds a at 300, and the rules filter that change; a change of
	// a at 330 that passes them must not be taken for a replay of what was indexed at 5000.
	r := &scriptedReader{watches: make(chan watch.Interface, 1)}
	r.list = func(int, metav1.ListOptions) (*page, error) {
		return scriptedPage("320", "", scriptedConfigMap("ns", "a", "uid-a", "300", "skip")), nil
	}
	r.watches <- scriptedWatch(watch.Event{Type: watch.Modified, Object: scriptedConfigMap("ns", "a", "uid-a", "330", "pub")})
	s := newScriptedIntake(t, r, scriptedWhenRules{})
	s.in.index.put("ns/a", entry{UID: "uid-a", ResourceVersion: "5000"})
	got := s.run(t, "", 1)
	if g := got[0]; g.meta.Type != event.Modified || g.meta.Name != "a" || g.meta.ResourceVersion != "330" {
		t.Errorf("got %s, want the change of a at 330", g)
	}
}

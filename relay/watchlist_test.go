package relay

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// streamReader answers one Watch with events, then ends the watch when closed.
type streamReader struct {
	events []watch.Event
	closed bool
	opts   metav1.ListOptions
}

func (r *streamReader) List(context.Context, metav1.ListOptions) (*page, error) {
	return nil, errors.New("unexpected list")
}

func (r *streamReader) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	r.opts = opts
	w := watch.NewFakeWithChanSize(len(r.events), false)
	for _, ev := range r.events {
		w.Action(ev.Type, ev.Object)
	}
	if r.closed {
		w.Stop()
	}
	return w, nil
}

func streamed(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

func bookmark(rv string, end bool) watch.Event {
	u := streamed("", rv)
	if end {
		u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return watch.Event{Type: watch.Bookmark, Object: u}
}

func statusEvent(code int32, reason metav1.StatusReason) watch.Event {
	s := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: code, Reason: reason}
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	return watch.Event{Type: watch.Error, Object: &unstructured.Unstructured{Object: m}}
}

func TestStreamListReturnsOnlyAfterTheInitialEventsEndBookmark(t *testing.T) {
	added := func(name, rv string) watch.Event { return watch.Event{Type: watch.Added, Object: streamed(name, rv)} }
	tests := []struct {
		name    string
		r       *streamReader
		wantRV  string
		wantErr func(error) bool
		seen    []string
	}{
		{"complete", &streamReader{events: []watch.Event{added("a", "3"), added("b", "5"), bookmark("7", true)}},
			"7", nil, []string{"a", "b"}},
		{"a plain bookmark is not the end", &streamReader{events: []watch.Event{added("a", "3"), bookmark("4", false), added("b", "5"), bookmark("7", true)}},
			"7", nil, []string{"a", "b"}},
		{"ended before the bookmark", &streamReader{events: []watch.Event{added("a", "3"), bookmark("4", false)}, closed: true},
			"", func(err error) bool { return errors.Is(err, errWatchListIncomplete) && !watchListRefused(err) }, []string{"a"}},
		{"a change before the end: not a streaming list", &streamReader{events: []watch.Event{added("a", "3"), {Type: watch.Modified, Object: streamed("a", "4")}}},
			"", watchListRefused, []string{"a"}},
		{"expired", &streamReader{events: []watch.Event{statusEvent(http.StatusGone, metav1.StatusReasonExpired)}},
			"", isExpired, nil},
		{"refused", &streamReader{events: []watch.Event{statusEvent(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)}},
			"", watchListRefused, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			rv, err := streamList(context.Background(), tt.r, "app=x", "", func(obj object) error {
				seen = append(seen, obj.GetName())
				return nil
			})
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && (err == nil || !tt.wantErr(err)) {
				t.Errorf("error: got %v", err)
			}
			if rv != tt.wantRV || !slices.Equal(seen, tt.seen) {
				t.Errorf("got rv %q, objects %v; want rv %q, objects %v", rv, seen, tt.wantRV, tt.seen)
			}
			o := tt.r.opts
			if o.SendInitialEvents == nil || !*o.SendInitialEvents || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan ||
				!o.AllowWatchBookmarks || o.ResourceVersion != "" || o.LabelSelector != "app=x" {
				t.Errorf("watch options: got %+v, want a streaming list of the latest state with the selector", o)
			}
		})
	}
}

func TestWatchListRefusedKnowsTheServersRefusals(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"invalid (WatchList disabled)", apierrors.NewInvalid(schema.GroupKind{Kind: "ListOptions"}, "", nil), true},
		{"bad request", apierrors.NewBadRequest("unknown parameter"), true},
		{"method not supported", apierrors.NewMethodNotSupported(gr, "watch"), true},
		{"forbidden is not a refusal of the feature", apierrors.NewForbidden(gr, "", errors.New("rbac")), false},
		{"expired", apierrors.NewResourceExpired("too old"), false},
		{"incomplete", errWatchListIncomplete, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := watchListRefused(tt.err); got != tt.want {
				t.Errorf("watchListRefused(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

package relay

import (
	"context"
	"errors"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// streamReply is the server's answer to one streaming list: an error, or events and then,
// if closed, the end of the watch.
type streamReply struct {
	err    error
	events []watch.Event
	closed bool
}

func TestReadAllFallsBackToPagesOnlyWhereTheModeAndServerSay(t *testing.T) {
	added := watch.Event{Type: watch.Added, Object: streamed("a", "5")}
	modified := watch.Event{Type: watch.Modified, Object: streamed("a", "6")}
	invalid := streamReply{events: []watch.Event{statusEvent(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)}}
	incomplete := streamReply{closed: true}
	complete := streamReply{events: []watch.Event{added, bookmark("9", true)}}
	// Each readAll's outcome: "streamed <rv>", "paged <rv>" (the page's rv is 50), or an error.
	const paged, streamed9 = "paged 50", "streamed 9"
	tests := []struct {
		name    string
		mode    WatchListMode
		replies []streamReply
		want    []string
		// fallbacks is how many NoteWatchListFallback the source reports: one when it
		// gives up streaming for the rest of the run, none otherwise.
		fallbacks int
	}{
		{"off never streams", WatchListOff, nil, []string{paged, paged}, 0},
		{"the default never streams", "", nil, []string{paged}, 0},
		{"on never falls back", WatchListOn, []streamReply{invalid, invalid, incomplete, incomplete, incomplete, complete},
			[]string{"invalid", "invalid", "incomplete", "incomplete", "incomplete", streamed9}, 0},
		{"auto streams where it can", WatchListAuto, []streamReply{complete, complete}, []string{streamed9, streamed9}, 0},
		{"auto pages at once after a refusal before any object", WatchListAuto, []streamReply{invalid}, []string{paged, paged}, 1},
		{"auto lists again after a plain watch's objects, then pages", WatchListAuto,
			[]streamReply{{events: []watch.Event{added, modified}}}, []string{"list again", paged}, 1},
		{"auto pages after three incomplete streams", WatchListAuto, []streamReply{incomplete, incomplete, incomplete},
			[]string{"incomplete", "incomplete", paged, paged}, 1},
		{"a complete stream resets the count", WatchListAuto,
			[]streamReply{incomplete, incomplete, complete, incomplete, incomplete, complete},
			[]string{"incomplete", "incomplete", streamed9, "incomplete", "incomplete", streamed9}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptedReader{
				list:    func(int, metav1.ListOptions) (*page, error) { return scriptedPage("50", ""), nil },
				watches: make(chan watch.Interface, len(tt.replies)),
			}
			r.watchErr = func(call int) error {
				if call > len(tt.replies) {
					t.Fatalf("watch %d: want at most %d streaming lists", call, len(tt.replies))
				}
				reply := tt.replies[call-1]
				if reply.err != nil {
					return reply.err
				}
				w := watch.NewFakeWithChanSize(len(reply.events), false)
				for _, ev := range reply.events {
					w.Action(ev.Type, ev.Object)
				}
				if reply.closed {
					w.Stop()
				}
				r.watches <- w
				return nil
			}
			in := newTestIntake(t, r).in
			in.src.cfg.WatchList = tt.mode
			notes := countNotes{}
			in.src.obs = notes
			for i, want := range tt.want {
				rv, err := in.readAll(context.Background(), func(object) error { return nil })
				got := outcomeOf(in.streamed, rv, err)
				if got != want {
					t.Fatalf("readAll %d: got %q (%v), want %q", i+1, got, err, want)
				}
			}
			if got := notes[NoteWatchListFallback]; got != tt.fallbacks {
				t.Errorf("fallbacks noted: got %d, want %d", got, tt.fallbacks)
			}
		})
	}
}

// outcomeOf names a readAll's outcome as the table does.
func outcomeOf(streamed bool, rv string, err error) string {
	switch {
	case errors.Is(err, errListAgain):
		return "list again"
	case errors.Is(err, errWatchListIncomplete):
		return "incomplete"
	case err != nil && watchListRefused(err):
		return "invalid"
	case err != nil:
		return err.Error()
	case streamed:
		return "streamed " + rv
	}
	return "paged " + rv
}

func TestIntakeListsAgainAtOnceWhenAStreamTurnsOutAPlainWatch(t *testing.T) {
	// The server answered the streaming list as a plain watch after some objects: the intake
	// falls back to pages and lists again without a failure's backoff. The clock never moves,
	// so a backoff would hold the list for good.
	r := &scriptedReader{
		list: func(int, metav1.ListOptions) (*page, error) {
			return scriptedPage("50", "", scriptedConfigMap("ns", "a", "uid-a", "6", "v")), nil
		},
		watches: make(chan watch.Interface, 1),
	}
	w := watch.NewFakeWithChanSize(2, false)
	w.Add(streamed("a", "5"))
	w.Modify(streamed("a", "6"))
	r.watches <- w
	ti := newTestIntake(t, r)
	ti.in.src.cfg.WatchList = WatchListAuto
	ti.start(t, "")
	waitFor(t, "the paged list", func() bool { return len(r.lists()) > 0 })
}

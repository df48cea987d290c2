package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// WatchListMode says how a source reads the full state of its resource (the initial sync and
// every relist): with the streaming list (a watch with sendInitialEvents=true, the
// apiserver's WatchList, as client-go's reflector uses it) or with paginated lists.
type WatchListMode string

const (
	// WatchListAuto streams where the server supports it and falls back to paginated
	// lists, for the rest of the run, when it refuses the request or does not end the
	// initial events (see watchListGiveUp).
	WatchListAuto WatchListMode = "auto"
	// WatchListOn always streams; a server that refuses fails the list like any error.
	WatchListOn WatchListMode = "on"
	// WatchListOff always lists page by page.
	WatchListOff WatchListMode = "off"
	// DefaultWatchListMode is the mode of a SourceConfig that sets none: paginated lists,
	// which every server serves, so that a zero SourceConfig reads as it always has. The
	// relay command sets its own default, WatchListAuto (RELAY_WATCH_LIST), on every source.
	DefaultWatchListMode = WatchListOff
)

// Valid reports whether m is one of the modes, or empty (the default).
func (m WatchListMode) Valid() bool {
	switch m {
	case "", WatchListAuto, WatchListOn, WatchListOff:
		return true
	}
	return false
}

// watchListGiveUp is how many streaming lists in a row may end before their initial-events-end
// bookmark before a source in WatchListAuto lists page by page instead: a server that
// ignores sendInitialEvents never sends the bookmark, and one that cuts a slow reader (the
// relay waits for NATS while it streams) may do so every time on a busy resource. Once is a
// network fault or an apiserver restart.
const watchListGiveUp = 3

// initialEventsEnd is the annotation of the bookmark that ends the initial events of a
// streaming list (metav1.InitialEventsAnnotationKey).
const initialEventsEnd = metav1.InitialEventsAnnotationKey

// errWatchListUnsupported is the error of a streaming list the server answered as a plain
// watch: an event other than ADDED before the initial-events-end bookmark.
var errWatchListUnsupported = errors.New("the server does not end the initial events with a bookmark")

// errWatchListIncomplete is the error of a streaming list that ended before its
// initial-events-end bookmark.
var errWatchListIncomplete = errors.New("watch list ended before its initial-events-end bookmark")

// streamList reads every object with a streaming list, calling fn for each, and returns the
// resourceVersion of the initial-events-end bookmark: the state of the objects read is the
// state at it (a consistent read, as a list's). It returns only after that bookmark, so that
// a caller that infers deletes from what fn did not see does so from a complete state.
func streamList(ctx context.Context, client reader, labelSelector, fieldSelector string, fn func(object) error) (string, error) {
	timeout := int64((minWatchTimeout + rand.N(minWatchTimeout)).Seconds())
	w, err := client.Watch(ctx, metav1.ListOptions{
		LabelSelector:        labelSelector,
		FieldSelector:        fieldSelector,
		AllowWatchBookmarks:  true,
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		TimeoutSeconds:       &timeout,
	})
	if err != nil {
		return "", fmt.Errorf("watch list: %w", err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return "", errWatchListIncomplete
		}
		switch ev.Type {
		case watch.Error:
			return "", fmt.Errorf("watch list: %w", apierrors.FromObject(ev.Object))
		case watch.Bookmark:
			obj, ok := asObject(ev.Object)
			if ok && obj.GetAnnotations()[initialEventsEnd] == "true" {
				return obj.GetResourceVersion(), nil
			}
		case watch.Added:
			obj, ok := asObject(ev.Object)
			if !ok {
				return "", fmt.Errorf("watch list: unexpected object %T", ev.Object)
			}
			if err := fn(obj); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("watch list: %w (got %s)", errWatchListUnsupported, ev.Type)
		}
	}
}

// watchListRefused reports errors of a server that does not serve streaming lists: the
// request is invalid to it (WatchList disabled, an apiserver before 1.27, an aggregated
// server) or its answer is not one.
func watchListRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsNotAcceptable(err) || errors.Is(err, errWatchListUnsupported)
}

// readAll reads every object for list, streamed or page by page as the source's WatchList
// mode and the server allow, calling fn for each, and returns the state's resourceVersion.
// In WatchListAuto a refused streaming list falls back to pages at once when fn has seen no
// object yet; otherwise (an incomplete stream) it fails, and list starts again.
func (in *intake) readAll(ctx context.Context, fn func(object) error) (string, error) {
	mode := in.src.cfg.WatchList
	if mode == "" {
		mode = DefaultWatchListMode
	}
	in.streamed = false
	if mode == WatchListOff || in.pagesOnly {
		return in.src.listPages(ctx, "", fn)
	}
	seen := 0
	rv, err := streamList(ctx, in.src.client, in.src.cfg.LabelSelector, in.src.cfg.FieldSelector, func(obj object) error {
		seen++
		return fn(obj)
	})
	if err == nil || mode != WatchListAuto || ctx.Err() != nil {
		if err == nil {
			in.streamIncomplete, in.streamed = 0, true
		}
		return rv, err
	}
	fallback := watchListRefused(err)
	if errors.Is(err, errWatchListIncomplete) {
		in.streamIncomplete++
		fallback = in.streamIncomplete >= watchListGiveUp
	}
	if !fallback {
		return "", err
	}
	in.pagesOnly = true
	in.src.note(NoteWatchListFallback)
	in.log.Warn().Err(err).Int("objects_streamed", seen).Msg("streaming list unavailable: listing page by page from now on")
	if seen > 0 {
		// fn has taken part of a state: a list of what is left would mix two states.
		return "", fmt.Errorf("%w: %v", errListAgain, err)
	}
	return in.src.listPages(ctx, "", fn)
}

// errListAgain fails a list that must start again from scratch.
var errListAgain = errors.New("list again")

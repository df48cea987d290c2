package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// listPageSize is the number of objects per list request: the apiserver's own pagers use
	// 500, large enough for few round trips, small enough to keep each response light.
	listPageSize = 500
	// minWatchTimeout is the shortest server-side watch timeout we ask for; each watch gets a
	// random one between it and twice it, like client-go's reflector, so that many relays
	// do not re-watch in lock step.
	minWatchTimeout = 5 * time.Minute
	// watchBackoffMin and watchBackoffMax bound the wait before re-opening a watch or a list
	// after an error (apiserver down, network fault).
	watchBackoffMin = 200 * time.Millisecond
	watchBackoffMax = 30 * time.Second
	// watchStallLimit is how long intake waits on a full buffer before it gives up the watch:
	// the apiserver keeps only a small buffer per watcher and cuts slow ones anyway; releasing
	// the watch spares it, and intake resumes from the last resourceVersion it handed on.
	watchStallLimit = 10 * time.Second
	// permanentBackoffMax caps the wait between retries of a resource the server refuses
	// (forbidden, not found): a fixed RoleBinding or a re-created CRD is noticed within it.
	permanentBackoffMax = 5 * time.Minute
	// shortWatch is how long a watch must have lived for its end to count as normal; a watch
	// that ends sooner without error is re-opened after a backoff, not at once.
	shortWatch = time.Second
)

// intake lists and watches one source's objects and feeds its pipeline. It is the only
// writer of the index.
type intake struct {
	src   *Source
	cp    *checkpointSaver
	out   chan<- *item
	index *index
	log   zerolog.Logger
	// release stops the open watch; set while a watch is open.
	release func()
	// publishedFailed is when reading the stream before an inferred delete or a derived
	// event last failed.
	publishedFailed time.Time
	// derivedChecked is set once the stream was read for the resource's derived events;
	// derivedNone when it held none, so that no derived event needs a look-up (see
	// derivedPublished).
	derivedChecked, derivedNone bool
	// knows holds the objects whose index entry this run wrote with every state condition
	// at a resourceVersion that ruleSince takes for older than one of them (replays and
	// relisted changes): their entries know them all.
	knows map[string]bool
	// horizon is the replay horizon: the cluster's resourceVersion when the intake started
	// ("" until read; see mayBeReplay).
	horizon string
	// cache holds shaped states when the rules need previous states; nil otherwise.
	cache shapedCache
	// nsSignal wakes the watch when namespace labels changed; nsChanges returns which, with
	// their earlier labels. Both are nil without namespace label selection.
	nsSignal  <-chan struct{}
	nsChanges func() map[string]map[string]string
	// dropped holds the namespaces whose changes intake dropped as unselected, so that a
	// namespace selected again is caught up even when its labels flapped back; nil without
	// namespace label selection.
	dropped map[string]bool
	// droppedPruneAt is the size of dropped at which noteDropped next prunes it.
	droppedPruneAt int
	// pagesOnly is set once the server refused streaming lists (WatchListAuto);
	// streamIncomplete counts the streaming lists in a row that ended early; streamed
	// tells whether the last list was streamed.
	pagesOnly        bool
	streamIncomplete int
	streamed         bool
}

// errCatchUp ends a watch so that namespaces that became selected are caught up with no watch
// open (a long catch-up would leave the watch unread, and the apiserver cuts slow watchers).
var errCatchUp = errors.New("namespace selection changed")

// run resumes from rv (empty: no checkpoint) and returns only when ctx ends: errors are
// retried (a permanent one slowly, reported by the source's status), never returned.
func (in *intake) run(ctx context.Context, rv string) {
	needList := rv == ""
	origin := event.InitialSync
	if !needList {
		origin = event.Relist
		in.log.Info().Str("rv", rv).Msg("resuming from checkpoint")
	}
	if in.src.namespaces != nil {
		in.nsSignal, in.nsChanges = in.src.namespaces.subscribe()
		if err := in.src.namespaces.WaitSynced(ctx); err != nil {
			return
		}
		// What the first list of namespaces reported is the starting selection, not a change.
		in.nsChanges()
		select {
		case <-in.nsSignal:
		default:
		}
		in.dropped = make(map[string]bool)
	}
	if in.src.rules.NeedsOld() {
		in.cache = make(shapedCache)
	}
	// needPrime: resuming with rules that compare with previous states, read the states at
	// the checkpoint first.
	needPrime := !needList && in.cache != nil
	// needCheck: before trusting rv (the checkpoint, or after a watch ended the last one
	// seen), compare it with the cluster's (see checkResume). A watch ends every 5 to 10
	// minutes, and an etcd restore restarts the apiservers, which ends it too: one list of
	// a single object per watch is cheap enough to check each time. The object index loaded
	// at start is checked once, with the checkpoint.
	needCheck, rvField, newest := !needList, "checkpoint_rv", in.index.newest()
	// needBump: a resume point was ahead of the cluster, move to the next history epoch
	// before the relist (see beginHistory); stale is that resume point.
	needBump, stale := false, ""
	failures, permanentFailures := 0, 0
	for ctx.Err() == nil {
		var err error
		switch {
		case needBump:
			if err = in.beginHistory(ctx, stale); err == nil {
				needBump = false
			}
		case needCheck:
			err = in.checkResume(ctx, rv, rvField, newest)
			if err == nil {
				needCheck, rvField, newest = false, "last_seen_rv", ""
			}
		case needPrime:
			err = in.prime(ctx, rv)
			if err == nil || (isPermanent(err) && !isExpired(err)) {
				if err != nil {
					// Some servers (aggregated APIs) refuse exact reads of an old
					// resourceVersion: carry on without previous states.
					in.log.Warn().Err(err).Msg("previous states unavailable: the first change of each object after this resume has no oldObject")
					err = nil
				}
				needPrime = false
			}
		case needList:
			in.src.synced.Store(false)
			rv, err = in.list(ctx, origin)
			if err == nil {
				in.src.note(listNote(origin))
				// Only a completed list ends the initial sync: a 410 on an expired continue
				// token restarts it with the same origin.
				needList = false
				origin = event.Relist
			}
		default:
			start := in.src.clock.Now()
			var opened bool
			opened, err = in.watch(ctx, &rv)
			needCheck = true
			if errors.Is(err, errCatchUp) {
				err = in.catchUp(ctx)
				if err == nil {
					continue
				}
			}
			if err == nil && in.src.clock.Since(start) >= shortWatch {
				failures = 0
				continue
			}
			if opened && err == nil {
				err = errors.New("watch ended early")
			}
		}
		if err == nil {
			failures, permanentFailures = 0, 0
			in.src.watchErr.Store(nil)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		in.src.synced.Store(false)
		if errors.Is(err, errListAgain) {
			// readAll gave up streaming after it had read part of a state (and said why):
			// nothing failed that a wait would help, so list again, page by page, at once.
			continue
		}
		switch {
		case isExpired(err) || isTooLarge(err) || errors.Is(err, errAhead) || errors.Is(err, errNeedRelist):
			switch {
			case isExpired(err):
				in.src.note(NoteExpired)
				in.log.Info().Str("rv", rv).Err(err).Msg("resourceVersion expired, relisting")
			case isTooLarge(err):
				in.src.note(NoteAhead)
				in.log.Error().Str("rv", rv).Err(err).Msg("resourceVersion too large for the cluster (etcd restored, or buckets of a rebuilt cluster): relisting")
			case errors.Is(err, errNeedRelist):
				in.log.Info().Str("rv", rv).Err(err).Msg("namespace catch-up failed, relisting")
			}
			// A relist rebuilds the cache of previous states too (its changes then carry
			// none where the object changed meanwhile).
			if !isExpired(err) && !errors.Is(err, errNeedRelist) {
				needBump, stale = true, rv
			}
			needList, needPrime, needCheck, newest = true, false, false, ""
			continue
		case isPermanent(err):
			// Forbidden, unknown resource (a deleted CRD): retrying soon cannot help, but an
			// operator may fix RBAC or re-create the CRD, so retry slowly while reporting it.
			permanentFailures++
			perr := fmt.Errorf("%w: %s: %w", ErrPermanent, in.src.describe(), err)
			in.src.watchErr.Store(&perr)
			wait := refusedRetry.delay(permanentFailures)
			in.log.Error().Err(err).Stringer("retry_in", wait).Msg("resource failing: the server refuses it")
			select {
			case <-ctx.Done():
				return
			case <-in.src.clock.After(wait):
			}
			continue
		}
		failures++
		wait := watchRetry.delay(failures)
		in.log.Warn().Err(err).Str("rv", rv).Stringer("retry_in", wait).Msg("list or watch failed, retrying")
		select {
		case <-ctx.Done():
			return
		case <-in.src.clock.After(wait):
		}
	}
}

// isExpired reports a 410: the resourceVersion has left the server's history, by reason or,
// from proxies and aggregated servers that set only the code, by status code.
func isExpired(err error) bool {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return true
	}
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusGone
}

// isPermanent reports errors that retrying soon cannot fix.
func isPermanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err) || apierrors.IsInvalid(err)
}

// watch watches from *rv until the watch ends, advancing *rv with every event and bookmark.
// opened reports whether the watch was established.
func (in *intake) watch(ctx context.Context, rv *string) (opened bool, err error) {
	timeout := int64((minWatchTimeout + rand.N(minWatchTimeout)).Seconds())
	w, err := in.src.client.Watch(ctx, metav1.ListOptions{
		LabelSelector:       in.src.cfg.LabelSelector,
		FieldSelector:       in.src.cfg.FieldSelector,
		ResourceVersion:     *rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		return false, fmt.Errorf("watch %s from %s: %w", in.src.describe(), *rv, err)
	}
	defer w.Stop()
	in.release = w.Stop
	defer func() { in.release = nil }()
	in.src.synced.Store(true)
	in.log.Info().Str("rv", *rv).Msg("watching")
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return true, nil
		case <-in.nsSignal:
			return true, errCatchUp
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return true, nil
		}
		switch ev.Type {
		case watch.Error:
			return true, apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			obj, ok := asObject(ev.Object)
			if !ok {
				continue
			}
			*rv = obj.GetResourceVersion()
			if err := in.markUrgent(ctx, *rv); err != nil {
				return true, nil
			}
		case watch.Added, watch.Modified, watch.Deleted:
			obj, ok := asObject(ev.Object)
			if !ok {
				return true, fmt.Errorf("watch %s: unexpected object %T", in.src.describe(), ev.Object)
			}
			if err := in.change(ctx, obj, ev.Type); err != nil {
				return true, err
			}
			*rv = obj.GetResourceVersion()
		}
	}
}

func (in *intake) mark(ctx context.Context, rv string) error {
	return in.send(ctx, &item{rv: rv})
}

func (in *intake) markUrgent(ctx context.Context, rv string) error {
	return in.send(ctx, &item{rv: rv, urgent: true})
}

// send hands an item to the pipeline, waiting while the buffer is full: the watch is not
// read meanwhile, which is the back-pressure the apiserver sees. After watchStallLimit the
// open watch is released (the item is still handed on; the next watch resumes after it).
func (in *intake) send(ctx context.Context, it *item) (err error) {
	it.received = in.src.clock.Now()
	if err := in.reserve(ctx, it); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			it.release(in.src.budget)
		}
	}()
	select {
	case in.out <- it:
		return nil
	default:
	}
	if in.release != nil {
		stall := in.src.clock.NewTimer(watchStallLimit)
		defer stall.Stop()
		select {
		case in.out <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-stall.C():
			in.log.Warn().Stringer("stalled", watchStallLimit).Msg("publishing is behind: watch released until the buffer drains")
			in.release()
			in.release = nil
		}
	}
	select {
	case in.out <- it:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// asObject returns the object a watch event carries.
func asObject(o runtime.Object) (object, bool) {
	switch o := o.(type) {
	case object:
		return o, true
	case *unstructured.Unstructured:
		return object{Unstructured: o}, true
	}
	return object{}, false
}

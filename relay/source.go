package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

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

// ErrPermanent marks an error that retrying cannot fix (forbidden, unknown resource): the
// source stops and reports it; other sources carry on.
var ErrPermanent = errors.New("permanent error")

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
	// publishedFailed is when reading the stream before an inferred delete last failed.
	publishedFailed time.Time
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
	// clock times watches, retries and the stall limit; nil is the real clock (tests step
	// a fake one).
	clock clock.WithTicker
}

// errCatchUp ends a watch so that namespaces that became selected are caught up with no watch
// open (a long catch-up would leave the watch unread, and the apiserver cuts slow watchers).
var errCatchUp = errors.New("namespace selection changed")

// run resumes from rv (empty: no checkpoint) and returns only when ctx ends or on a permanent
// error.
func (in *intake) run(ctx context.Context, rv string) error {
	if in.clock == nil {
		in.clock = clock.RealClock{}
	}
	needList := rv == ""
	origin := event.InitialSync
	if !needList {
		origin = event.Relist
		in.log.Info().Str("rv", rv).Msg("resuming from checkpoint")
	}
	if in.src.namespaces != nil {
		in.nsSignal, in.nsChanges = in.src.namespaces.subscribe()
		if err := in.src.namespaces.WaitSynced(ctx); err != nil {
			return nil
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
			start := in.clock.Now()
			var opened bool
			opened, err = in.watch(ctx, &rv)
			needCheck = true
			if errors.Is(err, errCatchUp) {
				err = in.catchUp(ctx)
				if err == nil {
					continue
				}
			}
			if err == nil && in.clock.Since(start) >= shortWatch {
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
			return nil
		}
		in.src.synced.Store(false)
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
			wait := permanentBackoff(permanentFailures)
			in.log.Error().Err(err).Stringer("retry_in", wait).Msg("resource failing: the server refuses it")
			select {
			case <-ctx.Done():
				return nil
			case <-in.clock.After(wait):
			}
			continue
		}
		failures++
		wait := watchBackoff(failures)
		in.log.Warn().Err(err).Str("rv", rv).Stringer("retry_in", wait).Msg("list or watch failed, retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-in.clock.After(wait):
		}
	}
	return nil
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

// permanentBackoff is the wait before retrying a resource the server refuses: growing from
// watchBackoffMax to permanentBackoffMax.
func permanentBackoff(failures int) time.Duration {
	d := watchBackoffMax
	for i := 1; i < failures && d < permanentBackoffMax; i++ {
		d *= 2
	}
	return min(d, permanentBackoffMax)
}

// list reads every object with a consistent read, page by page, and publishes the
// difference against the index: everything when the index is empty (origin says why), then
// deletes for indexed objects that are gone. It returns the list's resourceVersion, which a
// mark carries so the checkpoint moves there once all of it is acked. The cache of shaped
// states, when kept, is rebuilt from the list.
func (in *intake) list(ctx context.Context, origin event.Origin) (string, error) {
	start := time.Now()
	known := in.index.snapshot()
	seen := make(map[string]struct{}, len(known))
	published, total := 0, 0
	listRV, err := in.src.listPages(ctx, "", func(obj object) error {
		key := objectKey(obj.Unstructured)
		seen[key] = struct{}{}
		total++
		uid, rv := string(obj.GetUID()), obj.GetResourceVersion()
		prev, had := known[key]
		o := origin
		if had && o == event.InitialSync {
			// The index knows the object: a list cut short (an expired continue token, a
			// restart before its end) or a run whose checkpoint is lost published it, so
			// this is a difference against that, not part of an initial sync.
			o = event.Relist
		}
		var t event.Type
		switch {
		case had && prev.UID == uid && prev.ResourceVersion == rv:
			in.refresh(obj) // unchanged since published
			return nil
		case had && prev.UID != uid:
			// Deleted and re-created under the same name while we could not watch.
			if err := in.emitInferredDelete(ctx, key, prev); err != nil {
				return err
			}
			published++
			had = false
			t = event.Added
		case had:
			t = event.Modified
			if rvLess(rv, prev.ResourceVersion) {
				// The entry is from a history the cluster no longer has (etcd restored):
				// forget it now, so that the object's next changes are not taken for
				// replays even when the rules filter this one and nothing records it.
				in.index.put(key, entry{UID: uid, ResourceVersion: rv})
			}
		default:
			t = event.Added
		}
		if o == event.InitialSync && !in.src.cfg.InitialSync {
			return in.emitUnpublished(ctx, obj)
		}
		if in.cache != nil {
			// The states in between are gone and the one seen last may be several
			// changes old: the change carries no previous state (oldObject null), as
			// after a restart whose checkpoint has left the history.
			delete(in.cache, key)
		}
		published++
		return in.offer(ctx, obj, t, o, "", had)
	})
	if err != nil {
		return "", fmt.Errorf("list %s: %w", in.src.describe(), err)
	}
	for key, prev := range known {
		if _, ok := seen[key]; !ok {
			if err := in.emitVanished(ctx, key, prev); err != nil {
				return "", err
			}
			published++
		}
	}
	for key := range in.cache {
		if _, ok := seen[key]; !ok {
			delete(in.cache, key)
		}
	}
	if err := in.markUrgent(ctx, listRV); err != nil {
		return "", err
	}
	in.log.Info().Str("origin", string(origin)).Int("objects", total).Int("changes", published).
		Str("rv", listRV).Stringer("took", time.Since(start).Round(time.Millisecond)).Msg("listed")
	return listRV, nil
}

// listPages reads every object page by page, calling fn for each, and returns the list's
// resourceVersion. rv empty reads the latest state (a consistent read); otherwise the state
// at exactly rv, which fails as expired once rv has left etcd's history.
func (s *Source) listPages(ctx context.Context, rv string, fn func(object) error) (string, error) {
	return listPages(ctx, s.client, s.cfg.LabelSelector, s.cfg.FieldSelector, rv, fn)
}

func listPages(ctx context.Context, client reader, labelSelector, fieldSelector, rv string, fn func(object) error) (string, error) {
	type result struct {
		page *page
		// charged is what the page holds of the budget.
		charged int64
		err     error
	}
	// The next page is fetched while fn handles the current one: a list of many pages then
	// costs about the apiserver's time or ours, not their sum. One page ahead bounds the
	// memory to two pages, and the budget bounds their bytes: each request asks for as many
	// objects as fit a page's share (see pager), and waits until its estimate fits.
	budget := budgetOf(client)
	pages := make(chan result, 1)
	fetchCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		for r := range pages { // wait for the fetcher to stop
			budget.releasePage(r.charged)
		}
	}()
	go func() {
		defer close(pages)
		pg := newPager(budget)
		opts := metav1.ListOptions{LabelSelector: labelSelector, FieldSelector: fieldSelector, Limit: listPageSize}
		if rv != "" {
			opts.ResourceVersion = rv
			opts.ResourceVersionMatch = metav1.ResourceVersionMatchExact
		}
		for {
			charged, err := budget.reservePage(fetchCtx, pg.estimate())
			if err != nil {
				return // ctx ended
			}
			opts.Limit = pg.limit
			page, err := client.List(fetchCtx, opts)
			if err == nil {
				charged = chargePage(budget, charged, page.bytes)
				pg.observe(page.bytes, len(page.items))
			} else {
				budget.releasePage(charged)
				charged = 0
			}
			select {
			case pages <- result{page, charged, err}:
			case <-fetchCtx.Done():
				budget.releasePage(charged)
				return
			}
			if err != nil || page.continueToken == "" {
				return
			}
			// A continue token carries the list's resourceVersion itself.
			opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = page.continueToken, "", ""
		}
	}()
	var listRV string
	for r := range pages {
		if r.err != nil {
			return "", fmt.Errorf("list at %q: %w", rv, r.err)
		}
		if listRV == "" {
			listRV = r.page.resourceVersion
		}
		if err := handPage(r.page, r.charged, budget, fn); err != nil {
			return "", err
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return listRV, nil
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

// change publishes a live event unless the index shows it was already taken or the rules
// filter it.
func (in *intake) change(ctx context.Context, obj object, typ watch.EventType) error {
	key := objectKey(obj.Unstructured)
	uid, rv := string(obj.GetUID()), obj.GetResourceVersion()
	prev, indexed := in.index.get(key)
	if indexed && prev.covers(uid, rv) {
		in.log.Debug().Str("key", key).Str("rv", rv).Msg("replay suppressed")
		in.src.note(NoteReplaySuppressed)
		in.refresh(obj)
		return in.mark(ctx, rv)
	}
	t := event.Modified
	var marks eventMarks
	switch typ {
	case watch.Added:
		t = event.Added
		if indexed && prev.UID != uid {
			// The old object's DELETED was never seen (it cannot be, on a live watch); keep
			// the index honest for the relist diff; the cached state was the old object's.
			in.index.remove(key)
			indexed = false
			delete(in.cache, key)
		}
	case watch.Deleted:
		t = event.Deleted
		if indexed || in.selected(obj.GetNamespace()) {
			// Read before anything changes: on an error the watch ends before this event
			// and the next one delivers it again.
			left, err := in.leftSelection(ctx, obj)
			if err != nil {
				return err
			}
			marks.leftSelection = left
		}
	}
	return in.offerMarked(ctx, obj, t, event.Live, rv, indexed, marks)
}

// emitShaped queues the event of a change that passed the rules; body is the object's JSON
// read as is (nil: the rules encode shaped); checkpointRV is the
// resourceVersion the checkpoint may move to once it is acked (empty for list items).
func (in *intake) emitShaped(ctx context.Context, meta event.Meta, shaped, old map[string]any, body []byte, checkpointRV string, marks eventMarks) error {
	msg, mirror, omitted := in.src.message(meta, shaped, old, body, marks)
	id := msg.Header.Get(nats.MsgIdHdr)
	key := metaKey(meta)
	var record *nats.Msg
	if meta.Type == event.Deleted {
		record = in.src.record(key, "", "")
	} else {
		record = in.src.record(key, meta.UID, meta.ResourceVersion)
	}
	if omitted {
		in.log.Warn().Str("key", key).Str("rv", meta.ResourceVersion).Str("reason", msg.Header.Get(event.HeaderBodyOmitted)).
			Msg("publishing a reference without body")
	}
	in.log.Debug().Str("type", string(meta.Type)).Str("origin", string(meta.Origin)).Str("key", key).
		Str("rv", meta.ResourceVersion).Msg("event")
	return in.send(ctx, &item{key: key, msg: msg, mirror: withID(mirror, id, "mirror"), index: withID(record, id, "index"), rv: checkpointRV})
}

// emitUnpublished records obj in the durable index and the state mirror without publishing an
// event: an initial sync that skips publishing still knows the (selected) objects, so that a
// later relist neither re-announces them nor misses their deletes.
func (in *intake) emitUnpublished(ctx context.Context, obj object) error {
	if !in.selected(obj.GetNamespace()) {
		return nil
	}
	key := objectKey(obj.Unstructured)
	meta := in.src.meta(obj.Unstructured, event.Added, event.InitialSync)
	in.index.put(key, entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion})
	shaped := in.shape(obj)
	if in.cache != nil {
		in.cache[key] = shaped
	}
	id := meta.ID()
	it := &item{key: key, index: withID(in.src.record(key, meta.UID, meta.ResourceVersion), id, "index")}
	if in.src.mirror != nil {
		// Only the mirror's record is wanted; the event is built because the record is
		// derived from the same shaping and size limit.
		_, mirror, _ := in.src.message(meta, shaped, nil, obj.body, eventMarks{})
		it.mirror = withID(mirror, id, "mirror")
	}
	if it.current() == nil {
		return nil
	}
	return in.send(ctx, it)
}

// emitInferredDeleteMarked queues a DELETED for an object that vanished while nobody watched:
// its last known identity, with marks (final-state-unknown). The rules' event-type filter and
// expression apply; namespace selection does not (the object was relayed).
func (in *intake) emitInferredDeleteMarked(ctx context.Context, key string, prev entry, marks eventMarks) error {
	obj := in.src.tombstone(key, prev)
	in.index.remove(key)
	var old map[string]any
	if in.cache != nil {
		old = in.cache[key]
		delete(in.cache, key)
	}
	meta := in.src.meta(obj, event.Deleted, event.Relist)
	if id, ok := in.deletePublished(ctx, meta); ok {
		// Published before a crash that lost its index record: write only the record.
		in.src.note(NoteDeletePublished)
		in.log.Info().Str("key", key).Str("uid", prev.UID).Msg("delete already published: not inferred again")
		it := &item{key: key, index: withID(in.src.record(key, "", ""), id, "index")}
		if it.current() == nil {
			return nil
		}
		return in.send(ctx, it)
	}
	// Filters see the last state the relay saw when it has one; the body stays the identity.
	last := obj.Object
	if old != nil {
		last = old
	}
	v := in.src.rules.Decide(Change{Type: event.Deleted, Origin: event.Relist, Object: last, Old: old})
	if !v.Publish {
		id := meta.ID()
		it := &item{key: key, index: withID(in.src.record(key, "", ""), id, "index")}
		if in.src.mirror != nil {
			it.mirror = withID(in.src.mirror.Record(meta, nil), id, "mirror")
		}
		if it.current() == nil {
			return nil
		}
		return in.send(ctx, it)
	}
	in.log.Debug().Str("key", key).Str("uid", prev.UID).Msg("inferred delete")
	return in.emitShaped(ctx, meta, obj.Object, old, nil, "", marks)
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
	it.received = in.clock.Now()
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
		stall := in.clock.NewTimer(watchStallLimit)
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

// metaKey is objectKey for an event's identity.
func metaKey(m event.Meta) string {
	if m.Namespace != "" {
		return m.Namespace + "/" + m.Name
	}
	return m.Name
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

func objectKey(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func watchBackoff(failures int) time.Duration {
	d := watchBackoffMin
	for i := 1; i < failures && d < watchBackoffMax; i++ {
		d *= 2
	}
	d = min(d, watchBackoffMax)
	// Jitter of up to a quarter spreads retries of many sources after a shared outage.
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

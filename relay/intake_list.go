package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

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
	listRV, err := in.readAll(ctx, func(obj object) error {
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
				in.index.put(key, entry{UID: uid, ResourceVersion: rv, Held: prev.Held})
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
	in.setHorizon(listRV)
	if err := in.markUrgent(ctx, listRV); err != nil {
		return "", err
	}
	in.log.Info().Str("origin", string(origin)).Bool("streamed", in.streamed).Int("objects", total).Int("changes", published).
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
				charged = chargePage(budget, charged, page.Bytes)
				pg.observe(page.Bytes, len(page.Items))
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
			if err != nil || page.Continue == "" {
				return
			}
			// A continue token carries the list's resourceVersion itself.
			opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = page.Continue, "", ""
		}
	}()
	var listRV string
	for r := range pages {
		if r.err != nil {
			return "", fmt.Errorf("list at %q: %w", rv, r.err)
		}
		if listRV == "" {
			listRV = r.page.ResourceVersion
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

// prime fills the cache of shaped objects with the state at resourceVersion rv, read with an
// exact list, so that the first change after a resume is compared with the state the relay
// had seen rather than with nothing. It returns an expired error when rv has left etcd's
// history; the caller relists then.
func (in *intake) prime(ctx context.Context, rv string) error {
	cache := make(shapedCache)
	_, err := in.src.listPages(ctx, rv, func(obj object) error {
		if in.selected(obj.GetNamespace()) {
			cache[objectKey(obj.Unstructured)] = in.shape(obj)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list %s at the checkpoint: %w", in.src.describe(), err)
	}
	in.cache = cache
	in.log.Info().Int("objects", len(cache)).Str("rv", rv).Msg("previous states loaded for filters")
	return nil
}

// errNeedRelist asks the intake to relist: a namespace catch-up failed.
var errNeedRelist = errors.New("relist needed")

// catchUp publishes the objects of namespaces that have just become selected: each object
// not yet published comes out as added (modified when an older state was published before
// the namespace left the selection), from a consistent list of the namespace. Later watch
// events older than the list are then replays the index drops. It runs with no watch open.
//
// A namespace is caught up when it is selected now and either was not selected before its
// labels changed, or the intake dropped a change of it meanwhile (labels flapping, or the
// object's watch running ahead of the namespace watch).
func (in *intake) catchUp(ctx context.Context) error {
	for ns, before := range in.nsChanges() {
		if ns == "" || !in.selected(ns) || (in.src.nsRules.Namespace(ns, before) && !in.dropped[ns]) {
			continue
		}
		if in.src.cfg.Namespace != "" && ns != in.src.cfg.Namespace {
			continue // another source's namespace: this one watches only its own
		}
		start := time.Now()
		changes := 0
		_, err := listPages(ctx, in.src.nsClient(ns), in.src.cfg.LabelSelector, in.src.cfg.FieldSelector, "", func(obj object) error {
			key := objectKey(obj.Unstructured)
			uid := string(obj.GetUID())
			prev, indexed := in.index.get(key)
			if indexed && prev.covers(uid, obj.GetResourceVersion()) {
				return nil
			}
			t := event.Added
			if indexed && prev.UID != uid {
				// Deleted and re-created while the namespace was not selected.
				if err := in.emitInferredDelete(ctx, key, prev); err != nil {
					return err
				}
				indexed = false
			}
			if indexed {
				t = event.Modified
			}
			changes++
			return in.offer(ctx, obj, t, event.Relist, "", indexed)
		})
		if err != nil {
			// The changes are taken: a relist is the catch-up that cannot be lost.
			return fmt.Errorf("%w: list newly selected namespace %s: %w", errNeedRelist, ns, err)
		}
		delete(in.dropped, ns)
		in.log.Info().Str("selected_namespace", ns).Int("changes", changes).
			Stringer("took", time.Since(start).Round(time.Millisecond)).Msg("namespace selected: caught up on its objects")
	}
	return nil
}

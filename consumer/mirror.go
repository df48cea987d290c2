package consumer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Bootstrap reads the state mirror (bucket, RELAY_MIRROR_BUCKET) for the keys matching
// keyFilters (event.MirrorFilter; none: every key), and the position of stream
// (RELAY_STREAM) to follow it from, so that a service starting late learns the current state
// without listing the apiserver and then misses no change.
//
// It fails with ErrNotMirrored when a filter names a resource that is not mirrored
// (RELAY_MIRROR_RESOURCES), or is misspelled. The relay lists the resources it mirrors, per
// cluster, in the bucket's stream metadata (event.MirroredMetadataKey): a filter whose
// cluster, group and resource are listed (or, with '*' tokens, match a listed one) is mirrored,
// and yields no entry and no error when the resource has no object there. A bucket written by
// an older relay has no list: then a filter that matches nothing while its resource has
// objects elsewhere (another namespace) yields no entry and no error, and a resource without
// a single object fails as one that is not mirrored.
func Bootstrap(ctx context.Context, js jetstream.JetStream, bucket, stream string, keyFilters ...string) (Snapshot, error) {
	return BootstrapAcross(ctx, js, bucket, js, stream, keyFilters...)
}

// BootstrapAcross is Bootstrap for a mirror bucket and a stream reached through different
// JetStream contexts: on the hub of a fan-in topology, one cluster's mirror bucket in that
// cluster's domain (mirrorJS from jetstream.NewWithDomain) and the aggregate stream that
// sources the cluster's stream (streamJS; see Aggregate). The promise holds there too: a
// change whose entry is not in Entries reaches the cluster's stream after the position was
// read, so the aggregate stores it after NextSequence. NextSequence is a sequence of the
// aggregate, which holds other clusters' events too: filter the consumer on the cluster
// (SubjectsAcross) or expect them.
func BootstrapAcross(ctx context.Context, mirrorJS jetstream.JetStream, bucket string, streamJS jetstream.JetStream, stream string, keyFilters ...string) (Snapshot, error) {
	s, err := streamJS.Stream(ctx, stream)
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: stream %s: %w", bucket, stream, err)
	}
	// The position first: any change whose mirror entry is written after this point has its
	// event after it too.
	info, err := s.Info(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: stream %s: %w", bucket, stream, err)
	}
	snap := Snapshot{Objects: make(map[string][]byte), NextSequence: info.State.LastSeq + 1}
	byKey := make(map[string]Entry)
	kv, err := mirrorJS.KeyValue(ctx, bucket)
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, err)
	}
	if len(keyFilters) == 0 {
		keyFilters = []string{">"}
	}
	// WatchFiltered rewrites the filters it is given in place: hand it a copy.
	w, err := kv.WatchFiltered(ctx, slices.Clone(keyFilters), jetstream.IgnoreDeletes())
	if err != nil {
		return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return Snapshot{}, fmt.Errorf("bootstrap from %s: watcher closed", bucket)
			}
			if e == nil { // every current value delivered
				if err := checkMirrored(ctx, kv, keyFilters, byKey); err != nil {
					return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, err)
				}
				snap.Entries = sortedEntries(byKey)
				return snap, nil
			}
			entry, err := newEntry(e.Key(), e.Revision(), e.Value())
			if err != nil {
				return Snapshot{}, fmt.Errorf("bootstrap from %s: %w", bucket, err)
			}
			byKey[e.Key()] = entry
			snap.Objects[e.Key()] = e.Value()
		}
	}
}

// sortedEntries returns the entries in key order.
func sortedEntries(byKey map[string]Entry) []Entry {
	out := make([]Entry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// mirrorKeyTokens is the number of tokens of a mirror key (event.MirrorKey):
// <cluster>.<group>.<resource>.<namespace>.<name>.
const mirrorKeyTokens = 5

// maxListedResources bounds the resources an ErrNotMirrored error lists.
const maxListedResources = 10

// checkMirrored fails with ErrNotMirrored for a filter that matched none of the entries
// read, whose resource the bucket's metadata does not list as mirrored (event.ParseMirrored),
// and whose resource has no key in the bucket either. A bucket without a list (written by an older
// relay) is judged by its keys alone.
func checkMirrored(ctx context.Context, kv jetstream.KeyValue, filters []string, byKey map[string]Entry) error {
	var lists map[string][]string // read once, when a filter matches no entry
	listed := false
	for _, f := range filters {
		if matchesAny(f, byKey) {
			continue
		}
		resource, ok := resourceFilter(f)
		if !ok {
			return fmt.Errorf("key filter %q: %w: a mirror key is <cluster>.<group>.<resource>.<namespace>.<name> (event.MirrorFilter)", f, ErrNotMirrored)
		}
		if lists == nil {
			status, err := kv.Status(ctx)
			if err != nil {
				return fmt.Errorf("read mirrored resources: %w", err)
			}
			lists, listed = event.ParseMirrored(status.Metadata())
		}
		if listed && listsResource(lists, resource) {
			continue // mirrored, without an object where f looks
		}
		if resource != f {
			found, err := anyKey(ctx, kv, resource)
			if err != nil {
				return err
			}
			if found {
				continue // the resource is mirrored, with no object where f looks
			}
		}
		if listed {
			return fmt.Errorf("key filter %q: %w: the resource is not mirrored (RELAY_MIRROR_RESOURCES), or the filter is misspelled; the bucket mirrors %s", f, ErrNotMirrored, describeLists(lists))
		}
		held, err := heldResources(ctx, kv)
		if err != nil {
			return err
		}
		return fmt.Errorf("key filter %q: %w: the resource is not mirrored (RELAY_MIRROR_RESOURCES) or has no object, or the filter is misspelled; the bucket holds %s", f, ErrNotMirrored, held)
	}
	return nil
}

// matchesAny reports whether filter matches the key of some entry.
func matchesAny(filter string, byKey map[string]Entry) bool {
	for key := range byKey {
		if keyMatches(filter, key) {
			return true
		}
	}
	return false
}

// keyMatches reports whether a NATS subject filter (tokens, '*' and a final '>') matches key.
func keyMatches(filter, key string) bool {
	ft, kt := strings.Split(filter, "."), strings.Split(key, ".")
	for i, f := range ft {
		switch {
		case f == ">":
			return len(kt) > i
		case i >= len(kt):
			return false
		case f != "*" && f != kt[i]:
			return false
		}
	}
	return len(ft) == len(kt)
}

// resourceFilter widens a key filter to every object of the resources it names:
// <cluster>.<group>.<resource>.*.*. It returns false for a filter that cannot match a mirror
// key.
func resourceFilter(filter string) (string, bool) {
	tokens := strings.Split(filter, ".")
	if n := len(tokens); tokens[n-1] == ">" && n <= mirrorKeyTokens {
		tokens = tokens[:n-1]
		for len(tokens) < mirrorKeyTokens {
			tokens = append(tokens, "*")
		}
	}
	if len(tokens) != mirrorKeyTokens {
		return "", false
	}
	return strings.Join(append(tokens[:3:3], "*", "*"), "."), true
}

// anyKey reports whether the bucket holds a key matching filter.
func anyKey(ctx context.Context, kv jetstream.KeyValue, filter string) (bool, error) {
	found := false
	err := eachKey(ctx, kv, filter, func(string) bool {
		found = true
		return false
	})
	return found, err
}

// eachKey calls fn with every key of the bucket matching filter, until fn returns false.
// (jetstream.KeyValue.ListKeys leaves a goroutine behind when its reader stops early.)
func eachKey(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(key string) bool) error {
	w, err := kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return fmt.Errorf("list keys %s: %w", filter, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("list keys %s: %w", filter, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("list keys %s: watcher closed", filter)
			}
			if e == nil || !fn(e.Key()) {
				return nil
			}
		}
	}
}

// heldResources describes the resources the bucket holds objects of, as
// <cluster>.<group>.<resource> key prefixes, for an error message.
func heldResources(ctx context.Context, kv jetstream.KeyValue) (string, error) {
	seen := map[string]bool{}
	err := eachKey(ctx, kv, ">", func(key string) bool {
		if tokens := strings.SplitN(key, ".", mirrorKeyTokens); len(tokens) == mirrorKeyTokens {
			seen[strings.Join(tokens[:3], ".")] = true
		}
		return true
	})
	if err != nil {
		return "", err
	}
	if len(seen) == 0 {
		return "no object", nil
	}
	held := slices.Sorted(maps.Keys(seen))
	more := ""
	if len(held) > maxListedResources {
		more = fmt.Sprintf(" and %d more", len(held)-maxListedResources)
		held = held[:maxListedResources]
	}
	return "objects of " + strings.Join(held, ", ") + more, nil
}

// listsResource reports whether a resource filter (<cluster>.<group>.<resource>.*.*, its
// first three tokens literal or '*') names a resource some cluster's list holds.
func listsResource(lists map[string][]string, resource string) bool {
	tokens := strings.SplitN(resource, ".", mirrorKeyTokens)
	for cluster, grs := range lists {
		for _, gr := range grs {
			if keyMatches(strings.Join(tokens[:3], "."), cluster+"."+gr) {
				return true
			}
		}
	}
	return false
}

// describeLists writes every cluster's list for an error message:
// "<cluster> (<group>.<resource>, ...); ...", clusters in order.
func describeLists(lists map[string][]string) string {
	var out []string
	for _, cluster := range slices.Sorted(maps.Keys(lists)) {
		grs := lists[cluster]
		more := ""
		if len(grs) > maxListedResources {
			more = fmt.Sprintf(" and %d more", len(grs)-maxListedResources)
			grs = grs[:maxListedResources]
		}
		out = append(out, fmt.Sprintf("%s (%s%s)", cluster, strings.Join(grs, ", "), more))
	}
	return strings.Join(out, "; ")
}

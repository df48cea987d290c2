package relay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// StateNamer is DerivingRules that name their state conditions; a source asks its rules for
// it with a type assertion. With it, the source records from when it knows each state
// condition (see ruleSince), so that a condition added to a running deployment does not fire
// on the next change of every object it already holds for.
type StateNamer interface {
	// StateNames names the state conditions, in rule order.
	StateNames() []string
	// Holds returns, sorted, the state conditions that hold for c, firing and counting
	// nothing (a condition whose evaluation fails does not hold).
	Holds(c Change) []string
}

// holdsFor returns the state conditions of dr that hold for c: through StateNamer when dr
// names them, else those a derivation with none held finds.
func holdsFor(dr DerivingRules, c Change) []string {
	if sn, ok := dr.(StateNamer); ok {
		return sn.Holds(c)
	}
	return dr.Derive(c, nil).Held
}

// DerivedRulesKeyPrefix starts the checkpoint key under which a source records its
// ruleSince: the prefix, then the source's checkpoint key. A checkpoint key starts with the
// cluster's name, which never holds "_", so none starts with it; tools that list the
// checkpoints leave these keys out by it.
const DerivedRulesKeyPrefix = "_derived."

// maxRVLen is the longest resourceVersion a ruleSince records: etcd's revisions are 64-bit,
// at most 20 decimal digits.
const maxRVLen = 20

// DerivedRulesRecordSize returns the largest ruleSince value of a source whose rules name
// the state conditions names: every one recorded with the longest resourceVersion. The
// checkpoint bucket must accept values that long (see checkpoint.Config.LongestValue).
func DerivedRulesRecordSize(names []string) int {
	n := 0
	for i, name := range names {
		if i > 0 {
			n += len(",")
		}
		n += len(name) + len("=") + maxRVLen
	}
	return n
}

// ruleSince maps each state condition of a source's rules to the index's newest
// resourceVersion when the source first ran with it: an index entry at or below it may have
// been written before the condition existed and does not know whether it held; "" when every
// entry knows (the index was empty then). It is written through the Checkpointer, under the
// source's key with DerivedRulesKeyPrefix, as "name=rv" pairs joined by commas (names are DNS
// labels, resourceVersions integers: neither holds "=" or ",").
type ruleSince map[string]string

// noStateConditions is the record of a source whose rules have no state condition (a
// checkpoint value is never empty); parseRuleSince reads no pair from it.
const noStateConditions = "none"

// parseRuleSince reads a ruleSince; pairs it cannot read are left out (their conditions are
// then taken as new).
func parseRuleSince(v string) ruleSince {
	rs := make(ruleSince)
	for pair := range strings.SplitSeq(v, ",") {
		if name, rv, ok := strings.Cut(pair, "="); ok && name != "" {
			rs[name] = rv
		}
	}
	return rs
}

// String writes rs as parseRuleSince reads it, sorted by name.
func (rs ruleSince) String() string {
	pairs := make([]string, 0, len(rs))
	for _, name := range slices.Sorted(maps.Keys(rs)) {
		pairs = append(pairs, name+"="+rs[name])
	}
	return strings.Join(pairs, ",")
}

// update returns rs for the state conditions names: a condition it lacks is known from
// newest on, one no longer named is dropped (added back later, it is new again). changed
// reports whether the result differs from rs.
func (rs ruleSince) update(names []string, newest string) (out ruleSince, changed bool) {
	out = make(ruleSince, len(names))
	for _, name := range names {
		since, ok := rs[name]
		if !ok {
			since, changed = newest, true
		}
		out[name] = since
	}
	return out, changed || len(out) != len(rs)
}

// unknown returns the state conditions e does not know: those added after e was written. An
// entry whose resourceVersion is not an integer is taken to know them all.
func (rs ruleSince) unknown(e entry) []string {
	var out []string
	for name, since := range rs {
		if since != "" && wellFormedRV(e.ResourceVersion) && !rvLess(since, e.ResourceVersion) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// loadRuleSince reads the source's ruleSince, brings it up to the state conditions of its
// rules with newest, the index's newest resourceVersion as loaded, and saves it when that
// changed it. A source whose rules do not name their state conditions keeps none.
func (s *Source) loadRuleSince(ctx context.Context, newest string) error {
	sn, ok := s.rules.(StateNamer)
	if !ok || s.ckpt == nil {
		return nil
	}
	key := DerivedRulesKeyPrefix + s.key
	v, found, err := s.ckpt.Load(ctx, key)
	if err != nil {
		return fmt.Errorf("load derived rules record %q: %w", key, err)
	}
	if !found {
		// No record: the index is empty (a first run), or its entries were written by a
		// release before the record, or while the source had no derived rules. Every entry
		// is taken to know today's conditions (one added in the same rollout is then taken
		// as not held, as before the record). The record is written even without state
		// conditions, so that one added later is new.
		newest = ""
	}
	rs, changed := parseRuleSince(v).update(sn.StateNames(), newest)
	if changed || !found {
		v := rs.String()
		if v == "" {
			v = noStateConditions
		}
		if err := s.ckpt.Save(ctx, key, v); err != nil {
			return fmt.Errorf("save derived rules record %q: %w", key, err)
		}
	}
	s.since, s.sinceNewest = rs, rs.newest()
	return nil
}

// newest returns the highest since of rs ("" when every condition is known by every entry).
func (rs ruleSince) newest() string {
	newest := ""
	for _, since := range rs {
		if since != "" && (newest == "" || rvLess(newest, since)) {
			newest = since
		}
	}
	return newest
}

// unknownConditions returns the state conditions e does not know (see ruleSince.unknown),
// with one comparison for an entry written after every condition's since, which is every
// entry once the objects have changed since the conditions were added.
func (s *Source) unknownConditions(e entry) []string {
	if s.sinceNewest == "" || rvLess(s.sinceNewest, e.ResourceVersion) {
		return nil
	}
	return s.since.unknown(e)
}

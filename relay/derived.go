package relay

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// DerivingRules are Rules that also derive named events from changes (see docs/events.md,
// "Derived events"). A source whose Rules do not implement it publishes no derived events.
type DerivingRules interface {
	// Derive returns the derived events c fires and the state conditions that hold after
	// it; held names, sorted, those that held for the object's previous state (nil: none,
	// or the object is new).
	Derive(c Change, held []string) Derivation
}

// Derivation is what DerivingRules derived from a change.
type Derivation struct {
	// Fired are the derived events to publish, in rule order.
	Fired []DerivedEvent
	// Held names, sorted, the state conditions that hold after the change: recorded with
	// the object in the index and given back as held with its next change.
	Held []string
	// Err is an evaluation error of a condition, which then neither fired nor changed;
	// FirstError is set for the rule's first error, which is logged.
	Err        error
	FirstError bool
}

// DerivedEvent is one derived event of a change.
type DerivedEvent struct {
	// Name is the derived event's name (event.Meta.Derived).
	Name string
	// Body is the derived event's own body (its projection); nil when Projected is false:
	// the body is then the change's own event's body.
	Body      []byte
	Projected bool
}

// heldSeparator joins the names of held state conditions in an index entry: names are DNS
// labels and never hold it.
const heldSeparator = ","

// heldNames splits an entry's held conditions; nil for none.
func heldNames(held string) []string {
	if held == "" {
		return nil
	}
	return strings.Split(held, heldSeparator)
}

// derives reports whether the source's rules derive events.
func (in *intake) derives() bool {
	_, ok := in.src.rules.(DerivingRules)
	return ok
}

// derive runs the source's derived events over a change of key. prev is the object's
// index entry when indexed: its held conditions are the previous state of state conditions
// when it is the same object (uid). It returns the events fired, the held conditions before
// and after the change, joined, and learned, set when the entry did not know some state
// conditions (added to the rules after it was written: see ruleSince) and the change set
// their baseline: the change's index record must then be written even if nothing else
// changed, so that the next change knows them.
func (in *intake) derive(c Change, key, uid string, prev entry, indexed bool) (fired []DerivedEvent, before, after string, learned bool) {
	dr, ok := in.src.rules.(DerivingRules)
	if !ok {
		return nil, "", "", false
	}
	held := []string(nil)
	if indexed && prev.UID == uid {
		before = prev.Held
		held = heldNames(before)
		if unknown := in.src.unknownConditions(prev); len(unknown) > 0 && !in.knows[key] {
			held = in.baseline(dr, c, held, unknown)
			learned = true
		}
	} else if c.Type == event.Deleted {
		// A delete of an object the index does not hold (a filtered delete replayed after
		// the index record it wrote, a purged entry, a relay that did not record it): the
		// conditions that held for its last state are taken as held, so that only those
		// the delete itself makes hold fire.
		held = holdsFor(dr, Change{Type: event.Modified, Origin: c.Origin, Object: c.Object})
	}
	if c.Type == event.Deleted {
		// The delete removes the entry: an object created again under the name is new.
		delete(in.knows, key)
	} else if rv := shapedRV(c.Object); in.src.unknownConditions(entry{ResourceVersion: rv}) != nil {
		// The record this change writes is at or below a condition's since, yet written
		// with every condition: remember that it knows them for the rest of this run.
		if in.knows == nil {
			in.knows = make(map[string]bool)
		}
		in.knows[key] = true
	}
	d := dr.Derive(c, held)
	if d.Err != nil {
		in.src.note(NoteFilterError)
		if d.FirstError {
			in.log.Error().Err(d.Err).Str("key", key).
				Msg("derived event condition failed: the condition keeps its previous state; further failures of this rule are only counted")
		}
	}
	return d.Fired, before, strings.Join(d.Held, heldSeparator), learned
}

// baseline returns held with the state conditions of unknown, which the object's index entry
// does not know, taken as held before c unless c itself shows their rise: with the previous
// state known (c.Old), a condition that did not hold for it and holds now fires; without it,
// the current truth becomes the baseline and nothing fires (a condition added to a running
// deployment does not fire for every object it already holds for).
func (in *intake) baseline(dr DerivingRules, c Change, held, unknown []string) []string {
	out := slices.Clone(held)
	var before []string
	if c.Old != nil {
		// The previous state came with an added or a modified: evaluated as a modified (not
		// as c, which may be a delete), state conditions only, counting no error.
		before = holdsFor(dr, Change{Type: event.Modified, Origin: c.Origin, Object: c.Old})
	}
	for _, name := range unknown {
		if (c.Old == nil || slices.Contains(before, name)) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// derivedMessages builds the messages of a change's derived events: meta is the change's,
// base its own event (published or not), whose body and body headers a derived event
// without projection repeats. Derived events the stream already holds (see
// derivedPublished) are left out. since is the object's index record before the change when
// it is of the same object (uid), else the zero entry; held names the state conditions that
// hold after the change, joined.
func (in *intake) derivedMessages(ctx context.Context, meta event.Meta, base *nats.Msg, fired []DerivedEvent, since entry, held string) []*nats.Msg {
	s := in.src
	var out []*nats.Msg
	for _, f := range fired {
		dm := meta
		dm.Derived = f.Name
		if in.derivedPublished(ctx, dm, since, slices.Contains(heldNames(held), f.Name)) {
			in.src.note(NoteDerivedPublished)
			in.log.Info().Str("key", metaKey(meta)).Str("rv", meta.ResourceVersion).Str("derived", f.Name).
				Msg("derived event already published: not published again")
			continue
		}
		msg := &nats.Msg{Subject: dm.Subject(s.cfg.Prefix).String(), Header: dm.Header()}
		for _, h := range []string{event.HeaderFinalStateUnknown, event.HeaderLeftSelection} {
			if v := base.Header.Get(h); v != "" {
				msg.Header.Set(h, v)
			}
		}
		if !f.Projected {
			for _, h := range []string{event.HeaderPayload, event.HeaderRedacted, event.HeaderBodyOmitted} {
				if v := base.Header.Get(h); v != "" {
					msg.Header.Set(h, v)
				}
			}
			msg.Data = base.Data
			out = append(out, msg)
			continue
		}
		if s.cfg.Redacted != "" {
			msg.Header.Set(event.HeaderRedacted, event.EncodeHeaderValue(s.cfg.Redacted))
		}
		if s.cfg.MaxPayload > 0 && len(f.Body)+event.HeaderSize(msg.Header)+len(msg.Subject) > s.cfg.MaxPayload {
			msg.Header.Del(event.HeaderRedacted)
			msg.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
		} else {
			msg.Data = f.Body
		}
		out = append(out, msg)
	}
	return out
}

// derivedPublished reports whether the stream already holds the derived event dm or a later
// one of the same object: the last message on the object's subjects of that derived event
// (any change type) is of the same history epoch and either the same change, a later change
// (see covered), or, for a state condition (state), a change of the same object after since,
// its index record: the condition rose after the record and no record of its fall followed,
// so it already held. A derived event is published before its change's index record; a relay
// killed between the two replays the change after restarting (or relists, when the object
// changed meanwhile and the history expired), and the state condition, still recorded as not
// held, fires again: JetStream drops a copy under the same id within the duplicate window,
// this look-up beyond it and under another id.
//
// Only a change a previous run may have published needs the look-up: one at or below the
// replay horizon (see mayBeReplay), or a state condition's rise of an object whose index
// record is at or below it: the previous run may have published the rise after that record
// and lost the rise's own record, and a relist after a 410 finds the object changed past the
// horizon. That is at most one look-up per object, as the change's record moves past it. Each look-up is one synchronous read of the stream. The
// first look-up of a source reads the resource's derived events as a whole: when the stream
// holds none, no replay can hold one either, and the source makes no further look-ups. When
// the stream cannot be read, it reports false, with the pause deletePublished keeps: the
// event is then published, at worst a second time, which the duplicate window still drops
// within its span.
func (in *intake) derivedPublished(ctx context.Context, dm event.Meta, since entry, state bool) bool {
	state = state && since.UID == dm.UID
	if in.src.published == nil || in.derivedNone || !in.mayBeReplay(dm.ResourceVersion) && !(state && in.mayBeReplay(since.ResourceVersion)) {
		return false
	}
	if !in.derivedChecked {
		f := event.Filter{Prefix: in.src.cfg.Prefix, Cluster: dm.Cluster, Group: dm.Group,
			Version: dm.Version, Resource: dm.Resource, Derived: event.AllDerived}
		_, ok, err := in.lookup(ctx, f.String(), metaKey(dm), NoteStreamReadDerived)
		if err != nil {
			return false
		}
		in.derivedChecked = true
		if !ok {
			in.derivedNone = true
			return false
		}
	}
	f := event.Filter{Prefix: in.src.cfg.Prefix, Cluster: dm.Cluster, Group: dm.Group,
		Version: dm.Version, Resource: dm.Resource, Namespace: dm.Namespace, ClusterScoped: dm.Namespace == "",
		Name: dm.Name, Derived: dm.Derived}
	h, ok, err := in.lookup(ctx, f.String(), metaKey(dm), NoteStreamReadDerived)
	if err != nil || !ok {
		return false
	}
	if covered(h, dm) {
		return true
	}
	if !state {
		return false
	}
	last, err := event.MetaFromHeader(h)
	return err == nil && last.History == dm.History && last.UID == dm.UID && rvLess(since.ResourceVersion, last.ResourceVersion)
}

// mayBeReplay reports whether a change at rv may have been published by a previous run (or a
// previous leader): rv is at or below the replay horizon, the cluster's resourceVersion when
// this intake started, read before its first watch or list. A change above it was made after
// the intake started, when the previous run was gone, and cannot be in the stream: it needs
// no look-up. Before the horizon is known (the first list of a source without checkpoint)
// and for resourceVersions that are not integers, every change may be a replay.
func (in *intake) mayBeReplay(rv string) bool {
	return in.horizon == "" || !rvLess(in.horizon, rv)
}

// setHorizon records rv, the cluster's resourceVersion read at the intake's start, as the
// replay horizon (see mayBeReplay); only the first call counts.
func (in *intake) setHorizon(rv string) {
	if in.horizon == "" && wellFormedRV(rv) {
		in.horizon = rv
		in.log.Debug().Str("horizon", rv).Msg("replay horizon: changes past it need no stream look-up")
	}
}

// covered reports whether the stream's last message h on one of the object's subjects shows
// that the change dm was handled already: the same change (uid and resourceVersion), or a
// later change of the same name (any uid: the object may have been deleted and re-created),
// in the same history epoch. The changes of one name are published one at a time, every step
// of one before the next, so a later change in the stream means this one was done.
func covered(h nats.Header, dm event.Meta) bool {
	last, err := event.MetaFromHeader(h)
	if err != nil || last.History != dm.History {
		return false
	}
	return last.ResourceVersion == dm.ResourceVersion && last.UID == dm.UID || rvLess(dm.ResourceVersion, last.ResourceVersion)
}

// changeReplayed reports whether the stream shows that the change meta, of an object whose uid
// the index does not hold, was handled already: the stream's last ordinary event of the name
// is this change or a later one (see covered). That happens after a crash: a replayed delete
// whose index entry the delete removed, or a replayed change of an object deleted and
// re-created since (the index holds the new uid). Which state conditions held before it is
// then unknown, and what it derived was published with it. Without a PublishedLog, when the
// stream cannot be read, or for a change past the replay horizon, it reports false.
func (in *intake) changeReplayed(ctx context.Context, meta event.Meta) bool {
	if in.src.published == nil || !in.mayBeReplay(meta.ResourceVersion) {
		return false
	}
	f := event.Filter{Prefix: in.src.cfg.Prefix, Cluster: meta.Cluster, Group: meta.Group,
		Version: meta.Version, Resource: meta.Resource, Namespace: meta.Namespace, ClusterScoped: meta.Namespace == "", Name: meta.Name}
	h, ok, err := in.lookup(ctx, f.String(), metaKey(meta), NoteStreamReadDerived)
	return err == nil && ok && covered(h, meta)
}

// refusedRecord returns the index record to write instead of the change's own when NATS
// refuses the change's event for good (see pipeline.refused): the object's previous record
// (since, of the same object) with the state conditions that hold after the change, held.
// The index then still records only published changes, so that a relist after a restart
// offers the change again, but it knows the state its derived events went out for, so that
// neither that relist nor a replay fires them again. It is nil when the record would not
// change (no state condition rose or fell), for a delete, and for an object the index does
// not hold yet (an added): which is documented as a gap.
func (in *intake) refusedRecord(key string, meta event.Meta, since entry, held, id string) *nats.Msg {
	if meta.Type == event.Deleted || since.UID == "" || held == since.Held {
		return nil
	}
	return withID(in.src.record(key, since.UID, since.ResourceVersion, held), id, refusedRecordKind)
}

// refusedRecordKind ends the message id of a refused change's index record: not the
// change's own ":index", so that JetStream's duplicate window does not drop a later record of
// the same change (a replay whose event is accepted) as a repeat of it.
const refusedRecordKind = "index-refused"

// publishedDeleteDerived returns the derived events of a delete the stream holds but whose
// index record a crash lost (see deletePublished): the crash, between the delete's ack and its
// derived events' acks, may have kept them from being published, and the relist that finds
// the object gone replays nothing. They are derived again from the delete's body as
// published (else last, the last state the relay holds: the cached previous state, or the
// object's identity), with prev, the object's index record, as the previous state, under the
// delete's own identity (its resourceVersion, origin and history epoch, from its headers):
// the ids they had. derivedMessages leaves out those the stream holds. tomb is the inferred
// delete's meta, which names the object as the relay does.
func (in *intake) publishedDeleteDerived(ctx context.Context, key string, tomb event.Meta, prev entry, last map[string]any, h nats.Header, body []byte) []*nats.Msg {
	if !in.derives() {
		return nil
	}
	published, err := event.MetaFromHeader(h)
	if err != nil {
		return nil
	}
	meta := tomb
	meta.ResourceVersion, meta.Origin, meta.History = published.ResourceVersion, published.Origin, published.History
	obj := stateFromBody(h, body)
	if obj == nil {
		obj = last
	}
	if obj == nil {
		obj = in.src.tombstone(key, prev).Object
	}
	fired, _, _, _ := in.derive(Change{Type: event.Deleted, Origin: meta.Origin, Object: obj, Old: last}, key, meta.UID, prev, true)
	if len(fired) == 0 {
		return nil
	}
	return in.derivedMessages(ctx, meta, &nats.Msg{Header: h, Data: body}, fired, prev, "")
}

// stateFromBody decodes the object an event's body carries: the body itself, or its "object"
// member when the payload wraps it; nil when the body was omitted or is not an object.
func stateFromBody(h nats.Header, body []byte) map[string]any {
	if len(body) == 0 || h.Get(event.HeaderBodyOmitted) != "" {
		return nil
	}
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	if event.Payload(h.Get(event.HeaderPayload)) != event.PayloadObject {
		v, _ = v["object"].(map[string]any)
	}
	return v
}

package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// sourceRules lets a source use a compiled filter.Program as its relay.Rules and
// relay.NamespaceRules.
type sourceRules struct{ p *filter.Program }

var (
	_ relay.Rules          = sourceRules{}
	_ relay.DerivingRules  = derivingRules{}
	_ relay.StateNamer     = derivingRules{}
	_ relay.NamespaceRules = sourceRules{}
	_ relay.AsReadRules    = sourceRules{}
)

func (r sourceRules) NeedsOld() bool { return r.p.NeedsOld() }

func (r sourceRules) AsRead() (stripManaged, stripApplied, ok bool) { return r.p.AsRead() }

func (r sourceRules) Shape(obj map[string]any) map[string]any { return r.p.Shape(obj) }

func (r sourceRules) Decide(c relay.Change) relay.Verdict {
	// The expression's cost limit bounds an evaluation; it needs no deadline of its own.
	d := r.p.Decide(context.Background(), filter.Change{Type: c.Type, Origin: c.Origin, Object: c.Object, Old: c.Old})
	return relay.Verdict{Publish: d.Publish, Reason: d.Reason, Err: d.Err, FirstError: d.FirstError}
}

func (r sourceRules) Body(obj, old map[string]any) ([]byte, event.Payload, error) {
	b, err := r.p.Body(obj, old)
	return b, r.p.Payload().Event(), err
}

func (r sourceRules) Namespace(ns string, labels map[string]string) bool {
	return r.p.Namespace(ns, labels)
}

// derivingRules are sourceRules whose program derives events; a program without derived
// events is plugged in as sourceRules, so that its sources skip derivation entirely.
type derivingRules struct {
	sourceRules
	warn *projectionWarnings
}

// projectionWarnings logs, once per derived event name, that its projection failed and its
// events carry the change's own body instead.
type projectionWarnings struct {
	log    zerolog.Logger
	mu     sync.Mutex
	warned map[string]bool
}

func (w *projectionWarnings) failed(name string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.warned[name] {
		return
	}
	w.warned[name] = true
	w.log.Warn().Err(err).Str("derived", name).
		Msg("derived event projection failed, publishing the change's body instead (logged once per derived event)")
}

// rulesOf returns p as the source's relay.Rules; log names the source.
func rulesOf(p *filter.Program, log zerolog.Logger) relay.Rules {
	if p.HasDerived() {
		return derivingRules{sourceRules{p}, &projectionWarnings{log: log, warned: map[string]bool{}}}
	}
	return sourceRules{p}
}

// StateNames names the rule's state conditions.
func (r derivingRules) StateNames() []string { return r.p.StateNames() }

// Holds returns the state conditions that hold for c.
func (r derivingRules) Holds(c relay.Change) []string {
	return r.p.Holds(context.Background(), filter.Change{Type: c.Type, Origin: c.Origin, Object: c.Object, Old: c.Old})
}

func (r derivingRules) Derive(c relay.Change, held []string) relay.Derivation {
	// Like Decide: the conditions' cost limit bounds an evaluation.
	d := r.p.Derive(context.Background(), filter.Change{Type: c.Type, Origin: c.Origin, Object: c.Object, Old: c.Old}, held)
	out := relay.Derivation{Held: d.Held, Err: d.Err, FirstError: d.FirstError}
	for _, name := range d.Fired {
		e := relay.DerivedEvent{Name: name}
		body, ok, err := r.p.DerivedBody(name, c.Object)
		switch {
		case err != nil:
			r.warn.failed(name, err)
		case ok:
			e.Body, e.Projected = body, true
		}
		out.Fired = append(out.Fired, e)
	}
	return out
}

package main

import (
	"context"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// sourceRules lets a source use a compiled filter.Program as its relay.Rules and
// relay.NamespaceRules.
type sourceRules struct{ p *filter.Program }

var (
	_ relay.Rules          = sourceRules{}
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

package filter

import (
	"context"
	"fmt"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Change is one event as Decide sees it.
type Change struct {
	// Type is the event type.
	Type event.Type
	// Origin says how the relay learned of the change.
	Origin event.Origin
	// Object is the shaped new state (the last state for a delete).
	Object map[string]any
	// Old is the object's previous shaped state, the one the relay saw
	// last (published or filtered), nil when unknown (the first event of an
	// object, or a Program whose NeedsOld is false).
	Old map[string]any
}

// Reason says why Decide suppressed a change: the event package's FilterReason, which the
// relay reads without knowing this package.
type Reason = event.FilterReason

// The reasons. ReasonNone goes with a published change.
const (
	// ReasonNone: the change is published.
	ReasonNone = event.FilterReasonNone
	// ReasonEventType: the rule does not publish this event type.
	ReasonEventType = event.FilterReasonEventType
	// ReasonQuiet: a modified event in which only quiet fields changed.
	ReasonQuiet = event.FilterReasonQuiet
	// ReasonWhen: the when expression returned false.
	ReasonWhen = event.FilterReasonWhen
)

// Decision is the outcome of Decide.
type Decision struct {
	// Publish is true when the change is to be published.
	Publish bool
	// Reason says why a change is not published; ReasonNone otherwise.
	Reason Reason
	// Err is an evaluation error of the when expression; the change is
	// then published (fail open: losing a change is worse than an extra
	// event).
	Err error
	// FirstError is true for the Program's first evaluation error only, so
	// that the caller logs once per rule; EvalErrors counts all of them.
	FirstError bool
}

// Decide decides whether c is published, in this order: the event-type
// filter; quiet updates (a modified event with a known Old whose object
// equals Old once quiet fields are ignored in both is suppressed); the
// when expression. ctx interrupts a long evaluation; the cost limit
// bounds it anyway. Decide does not modify c's objects.
func (p *Program) Decide(ctx context.Context, c Change) Decision {
	if !p.Events(c.Type) {
		return Decision{Reason: ReasonEventType}
	}
	if p.quiet != nil && c.Type == event.Modified && c.Old != nil && equalExcept(c.Object, c.Old, p.quiet) {
		return Decision{Reason: ReasonQuiet}
	}
	if p.when == nil {
		return Decision{Publish: true}
	}
	a := activationPool.Get().(*activation)
	*a = activation{object: c.Object, oldObject: c.Old, eventType: string(c.Type), origin: string(c.Origin)}
	out, _, err := p.when.prg.ContextEval(ctx, a)
	*a = activation{}
	activationPool.Put(a)
	if err == nil {
		if b, ok := out.Value().(bool); ok {
			if b {
				return Decision{Publish: true}
			}
			return Decision{Reason: ReasonWhen}
		}
		err = fmt.Errorf("result is %s, not bool", out.Type().TypeName())
	}
	n := p.evalErrorCount.Add(1)
	return Decision{Publish: true, Err: fmt.Errorf("evaluate when of %s: %w", p.res, err), FirstError: n == 1}
}

// equalExcept reports whether a and b are equal when the values matched
// by quiet are ignored on both sides. It allocates nothing.
func equalExcept(a, b any, quiet *pathTree) bool {
	if quiet == nil {
		return jsonEqual(a, b)
	}
	if quiet.leaf {
		return true
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, x := range av {
			c := quiet.child(k)
			if c != nil && c.leaf {
				continue
			}
			y, ok := bv[k]
			if !ok || !equalExcept(x, y, c) {
				return false
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				if c := quiet.child(k); c == nil || !c.leaf {
					return false
				}
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !equalExcept(av[i], bv[i], quiet.wildcard) {
				return false
			}
		}
		return true
	}
	return jsonEqual(a, b)
}

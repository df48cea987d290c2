package relay

import (
	"encoding/json"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Rules decide, for one source, which changes are published and what their bodies hold. The
// filter package provides them; a source without Rules publishes every change with
// managedFields stripped.
type Rules interface {
	// NeedsOld reports whether Decide or Body use the previous state of an object: only
	// then does the source keep each object's shaped state in memory.
	NeedsOld() bool
	// Shape returns the object as published (stripped, redacted, projected). It may modify
	// obj, which the source owns and does not use afterwards.
	Shape(obj map[string]any) map[string]any
	// Decide says whether a change is published.
	Decide(c Change) Verdict
	// Body encodes the message body of a change from the shaped object and, when known,
	// its previous shaped state; payload says how the body holds them
	// (event.PayloadObject: the bare object).
	Body(obj, old map[string]any) (body []byte, payload event.Payload, err error)
}

// NamespaceRules select objects by their namespace on the client side.
type NamespaceRules interface {
	// Namespace reports whether objects in namespace ns, whose labels are labels (nil when
	// the namespace is not known), are relayed.
	Namespace(ns string, labels map[string]string) bool
}

// Change is one change as Rules see it: both states shaped.
type Change struct {
	Type   event.Type
	Origin event.Origin
	// Object is the new state; for a delete, the last state.
	Object map[string]any
	// Old is the previous state, nil when unknown (first sight, or no cache kept).
	Old map[string]any
}

// Verdict is what Rules decided about a change.
type Verdict struct {
	Publish bool
	// Reason names the rule that suppressed the change.
	Reason event.FilterReason
	// Err is an evaluation error; the change is then published (failing open loses
	// nothing). FirstError is set for the first error of the rule, which is logged.
	Err        error
	FirstError bool
}

// defaultRules publish everything with managedFields stripped: the behaviour of a source
// that was given no Rules.
type defaultRules struct{}

func (defaultRules) NeedsOld() bool { return false }

// AsRead: objects are published as read, less managedFields.
func (defaultRules) AsRead() (stripManaged, stripApplied, ok bool) { return true, false, true }

func (defaultRules) Shape(obj map[string]any) map[string]any {
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return obj
}

func (defaultRules) Decide(Change) Verdict { return Verdict{Publish: true} }

func (defaultRules) Body(obj, _ map[string]any) ([]byte, event.Payload, error) {
	b, err := json.Marshal(obj)
	return b, event.PayloadObject, err
}

var (
	_ Rules       = defaultRules{}
	_ AsReadRules = defaultRules{}
)

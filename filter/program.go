package filter

import (
	"fmt"
	"slices"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// isCoreSecrets reports whether r is the core group's secrets.
func isCoreSecrets(r event.Resource) bool {
	return r.Group == "" && r.Resource == "secrets"
}

// Program is a Rule compiled for one resource. All its methods are safe
// for concurrent use.
type Program struct {
	res            event.Resource
	labelSelector  string
	fieldSelector  string
	namespaces     []string
	exclude        []string
	nsSelector     labels.Selector
	events         [3]bool // added, modified, deleted
	when           *compiledWhen
	quiet          *pathTree // nil when quiet updates are off
	stripManaged   bool
	stripApplied   bool
	redact         *pathTree // nil when nothing is redacted
	redacted       []string
	project        *pathTree // nil without a projection
	payload        PayloadMode
	needsOld       bool
	derived        []compiledDerived
	evalErrorCount atomic.Uint64
}

// Compile compiles rule for res. rule is usually one of File.Rules (the
// file's defaults already merged); its Resource is ignored, res names the
// resource. Fields left unset take the built-in defaults: all event types,
// no when expression, quiet updates off, no projection, payload object,
// managedFields and the last-applied annotation stripped, Secrets
// redacted. The rule is validated again (so Compile also accepts a rule
// built in code); errors are *ValidationError naming res as the rule.
func Compile(rule Rule, res event.Resource) (*Program, error) {
	ps := &problems{}
	name := res.String()
	validateRule(ps, name, rule, kindCompile)
	crossCheck(ps, name, rule, rule)
	if rule.RedactSecrets != nil && !isCoreSecrets(res) {
		ps.add(name, "redactSecrets", "only applies to secrets (core group); use sensitive for other resources")
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	p := &Program{
		res:          res,
		namespaces:   slices.Clone(rule.Namespaces),
		exclude:      slices.Clone(rule.ExcludeNamespaces),
		stripManaged: boolOr(rule.StripManagedFields, true),
		stripApplied: boolOr(rule.StripLastApplied, true),
		payload:      PayloadObject,
	}
	if rule.LabelSelector != nil {
		p.labelSelector = *rule.LabelSelector
	}
	if rule.FieldSelector != nil {
		p.fieldSelector = *rule.FieldSelector
	}
	if rule.NamespaceSelector != nil && *rule.NamespaceSelector != "" {
		p.nsSelector, _ = labels.Parse(*rule.NamespaceSelector) // validated
	}
	if rule.Events == nil {
		p.events = [3]bool{true, true, true}
	}
	for _, e := range rule.Events {
		p.events[eventIndex(event.Type(e))] = true
	}
	if rule.When != nil && *rule.When != "" {
		p.when, _ = compileWhen(*rule.When) // validated
	}
	if boolOr(rule.QuietUpdates, len(rule.QuietFields) > 0) {
		p.quiet = newPathTree(mustParsePaths(append(DefaultQuietFields(), rule.QuietFields...)))
	}
	var redact []string
	if isCoreSecrets(res) && boolOr(rule.RedactSecrets, true) {
		redact = append(redact, "data", "stringData")
		p.stripApplied = true // the annotation holds the data in clear
	}
	redact = append(redact, rule.Sensitive...)
	if paths := mustParsePaths(redact); len(paths) > 0 {
		p.redact = newPathTree(paths)
		for _, path := range paths {
			p.redacted = append(p.redacted, path.String())
		}
	}
	if len(rule.Fields) > 0 {
		p.project = newPathTree(mustParsePaths(append(IdentityFields(), rule.Fields...)))
	}
	if rule.Payload != nil {
		p.payload = *rule.Payload
	}
	p.derived = compileDerived(rule.Derived)
	p.needsOld = p.quiet != nil || p.payload != PayloadObject || (p.when != nil && p.when.usesOld) ||
		slices.ContainsFunc(p.derived, func(cd compiledDerived) bool { return cd.transition })
	return p, nil
}

// DefaultQuietFields returns the field paths that are quiet whenever quiet
// updates are on, before the rule's own quietFields.
func DefaultQuietFields() []string {
	return []string{
		// Changes on every write of the object, whatever changed.
		"metadata.resourceVersion",
		// Bookkeeping of which manager owns which field; its timestamps
		// change on every apply even when nothing else does.
		"metadata.managedFields",
		// Node heartbeats: the kubelet rewrites every Node condition's
		// heartbeat time on each status update.
		"status.conditions[*].lastHeartbeatTime",
		// Lease renewals (node heartbeats, leader election) every few
		// seconds. Among built-in kinds only Leases have spec.renewTime; a
		// custom resource with the same field is silenced too, which is
		// what the list is for.
		"spec.renewTime",
	}
}

// IdentityFields returns the field paths a projection always keeps, so
// that a projected object still says what it is and which version of it.
func IdentityFields() []string {
	return []string{
		"apiVersion",
		"kind",
		"metadata.name",
		"metadata.namespace",
		"metadata.uid",
		"metadata.resourceVersion",
		"metadata.generation",
		"metadata.deletionTimestamp",
	}
}

// boolOr returns *b, or def when b is nil.
func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// mustParsePaths parses validated paths.
func mustParsePaths(list []string) []Path {
	paths := make([]Path, 0, len(list))
	for _, s := range list {
		paths = append(paths, MustParsePath(s))
	}
	return paths
}

// eventIndex maps a valid event type to its index in Program.events.
func eventIndex(t event.Type) int {
	switch t {
	case event.Added:
		return 0
	case event.Modified:
		return 1
	}
	return 2
}

// Resource returns the resource p was compiled for.
func (p *Program) Resource() event.Resource { return p.res }

// NeedsOld reports whether Decide, Derive or Body use the old object: when
// the when expression or a derived event's condition mentions oldObject,
// quiet updates are on, or the payload carries the old object or a patch. Only then must the relay keep the
// last seen shaped object of every watched object.
func (p *Program) NeedsOld() bool { return p.needsOld }

// AsRead reports whether p publishes objects as read from the apiserver,
// less metadata.managedFields when stripManaged and the last-applied
// annotation when stripApplied: no when expression, quiet updates,
// redaction, projection or derived events, and the object as payload. Shape then does no
// more than those two removals and Decide needs only the event type, so
// the relay can skip decoding the objects' bodies.
func (p *Program) AsRead() (stripManaged, stripApplied, ok bool) {
	ok = p.when == nil && p.quiet == nil && p.redact == nil && p.project == nil && p.payload == PayloadObject &&
		len(p.derived) == 0
	return p.stripManaged, p.stripApplied, ok
}

// Events reports whether events of type t are published. An invalid t is
// never published.
func (p *Program) Events(t event.Type) bool {
	return t.Valid() && p.events[eventIndex(t)]
}

// Namespace reports whether objects in namespace ns pass the client-side
// namespace rules: ns is not excluded and, with a namespace selector, the
// Namespace's labels nsLabels (nil when the Namespace is unknown) match
// it. Cluster-scoped objects (ns "") always pass. The server-side
// namespaces list is not checked here.
func (p *Program) Namespace(ns string, nsLabels map[string]string) bool {
	if ns == "" {
		return true
	}
	if slices.Contains(p.exclude, ns) {
		return false
	}
	return p.nsSelector == nil || p.nsSelector.Matches(labels.Set(nsLabels))
}

// NamespaceSelector returns the namespace label selector, nil when unset;
// the relay watches Namespaces only when it is not nil.
func (p *Program) NamespaceSelector() labels.Selector { return p.nsSelector }

// ServerNamespaces returns the namespaces to watch, one watch each; nil
// means all namespaces with one watch. The caller must not modify it.
func (p *Program) ServerNamespaces() []string {
	if len(p.namespaces) == 0 {
		return nil
	}
	return p.namespaces
}

// LabelSelector returns the server-side label selector, "" for none.
func (p *Program) LabelSelector() string { return p.labelSelector }

// FieldSelector returns the server-side field selector, "" for none.
func (p *Program) FieldSelector() string { return p.fieldSelector }

// Payload returns the payload mode used by Body.
func (p *Program) Payload() PayloadMode { return p.payload }

// Redacted lists, as field paths, what Shape redacts: data and stringData
// for Secrets, then the rule's sensitive paths. Empty when nothing is. The
// caller must not modify it.
func (p *Program) Redacted() []string { return p.redacted }

// EvalErrors returns the number of when evaluation errors so far.
func (p *Program) EvalErrors() uint64 { return p.evalErrorCount.Load() }

// String returns the resource p was compiled for.
func (p *Program) String() string { return fmt.Sprint(p.res) }

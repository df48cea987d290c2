package filter

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// Derived is a named event derived from the changes of one resource (a rule's derived
// list): published after a change's own event when Condition holds for it.
type Derived struct {
	// Name names the event in its subject and CloudEvents type: a DNS label
	// ([a-z0-9]([a-z0-9-]*[a-z0-9])?, at most MaxDerivedNameLen bytes), unique within the
	// rule, and none of added, modified and deleted.
	Name string `json:"name"`
	// Condition is a CEL expression over object, oldObject, eventType and origin, compiled
	// like when. One that does not mention oldObject is a state condition: the event is
	// published when it starts to hold. One that mentions oldObject is a transition
	// condition: the event is published for every change for which it holds.
	Condition string `json:"condition"`
	// Fields, when set, projects the body onto these field paths (plus the identity
	// fields); unset, the body is the change's own body.
	Fields []string `json:"fields"`
}

// MaxDerivedNameLen is the longest name of a derived event: a DNS label, which keeps the
// subject within event.MaxSubjectLen.
const MaxDerivedNameLen = event.MaxDerivedNameLen

// derivedNameRE is the syntax of a derived event's name.
var derivedNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// derivedFields are the fields of one derived event in the rules file.
var derivedFields = []string{"condition", "fields", "name"}

// decodeDerived decodes a rule's derived list item by item, so that unknown fields and
// values of the wrong type become problems naming the item.
func decodeDerived(ps *problems, rule string, raw json.RawMessage) []Derived {
	if isNull(raw) {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		ps.add(rule, "derived", "must be a list of derived events (name, condition, fields)")
		return nil
	}
	out := make([]Derived, 0, len(list))
	for i, item := range list {
		var d Derived
		obj, ok := decodeObject(item)
		if !ok {
			ps.add(rule, fmt.Sprintf("derived[%d]", i), "must be a mapping with name, condition and fields")
			out = append(out, d)
			continue
		}
		for _, k := range sortedKeys(obj) {
			field := fmt.Sprintf("derived[%d].%s", i, k)
			var err error
			switch k {
			case "name":
				err = json.Unmarshal(obj[k], &d.Name)
			case "condition":
				err = json.Unmarshal(obj[k], &d.Condition)
			case "fields":
				err = json.Unmarshal(obj[k], &d.Fields)
			default:
				ps.add(rule, field, "unknown field (want one of %v)", derivedFields)
				continue
			}
			if err != nil {
				want := "a string"
				if k == "fields" {
					want = "a list of strings"
				}
				ps.add(rule, field, "must be %s%s", want, gotType(err))
			}
		}
		out = append(out, d)
	}
	return out
}

// checkDerived checks a rule's derived events: names, conditions and projections.
func checkDerived(ps *problems, rule string, list []Derived) {
	for i, d := range list {
		field := func(f string) string { return fmt.Sprintf("derived[%d].%s", i, f) }
		switch {
		case d.Name == "":
			ps.add(rule, field("name"), "required")
		case len(d.Name) > MaxDerivedNameLen:
			ps.add(rule, field("name"), "%q: %d bytes, longer than %d", d.Name, len(d.Name), MaxDerivedNameLen)
		case !derivedNameRE.MatchString(d.Name):
			ps.add(rule, field("name"), "%q: want lower-case letters, digits and '-', starting and ending with a letter or digit", d.Name)
		case event.Type(d.Name).Valid():
			ps.add(rule, field("name"), "%q is an event type: choose another name", d.Name)
		default:
			if j := slices.IndexFunc(list[:i], func(o Derived) bool { return o.Name == d.Name }); j >= 0 {
				ps.add(rule, field("name"), "duplicate: %q is also derived[%d]", d.Name, j)
			}
		}
		if d.Condition == "" {
			ps.add(rule, field("condition"), "required")
		} else {
			for _, iss := range compileIssues(d.Condition) {
				ps.list = append(ps.list, Problem{File: ps.file, Rule: rule, Field: field("condition"),
					ExprLine: iss.line, ExprColumn: iss.column, Message: iss.message})
			}
		}
		checkPaths(ps, rule, field("fields"), d.Fields)
	}
}

// compiledDerived is a Derived compiled for a Program.
type compiledDerived struct {
	name string
	cond *compiledWhen
	// transition is set when the condition mentions oldObject.
	transition bool
	project    *pathTree // nil: the change's own body
}

// compileDerived compiles validated derived events.
func compileDerived(list []Derived) []compiledDerived {
	out := make([]compiledDerived, 0, len(list))
	for _, d := range list {
		cond, _ := compileWhen(d.Condition) // validated
		cd := compiledDerived{name: d.Name, cond: cond, transition: cond.usesOld}
		if len(d.Fields) > 0 {
			cd.project = newPathTree(mustParsePaths(append(IdentityFields(), d.Fields...)))
		}
		out = append(out, cd)
	}
	return out
}

// Derivation is the outcome of Derive.
type Derivation struct {
	// Fired names the derived events the change publishes, in rule order.
	Fired []string
	// Held names, sorted, the state conditions that hold after the change: what the relay
	// records for the object and gives back as held with its next change.
	Held []string
	// Err is the first evaluation error of a condition; that condition then neither fires
	// nor changes whether it holds. FirstError is true for the Program's first evaluation
	// error only.
	Err        error
	FirstError bool
}

// HasDerived reports whether the rule derives events.
func (p *Program) HasDerived() bool { return len(p.derived) > 0 }

// StateNames returns the names of the rule's state conditions (those that do not mention
// oldObject), in rule order.
func (p *Program) StateNames() []string {
	var out []string
	for _, cd := range p.derived {
		if !cd.transition {
			out = append(out, cd.name)
		}
	}
	return out
}

// Holds returns, sorted, the rule's state conditions that hold for c, without firing or
// counting anything: it reads the state of an object the caller has no record for (a
// condition whose evaluation fails is taken as not holding). Transition conditions are left
// out.
func (p *Program) Holds(ctx context.Context, c Change) []string {
	var out []string
	for _, cd := range p.derived {
		if cd.transition {
			continue
		}
		if now, err := p.evalCondition(ctx, cd.cond, c); err == nil && now {
			out = append(out, cd.name)
		}
	}
	slices.Sort(out)
	return out
}

// Derive decides which derived events c fires. held names the state conditions that held
// for the object's previous state (nil when the object is new or none held; names no longer
// in the rule are ignored). A state condition fires when it holds for c.Object and is not in
// held; a transition condition (one that mentions oldObject, which is c.Old) fires whenever
// it holds. Derive does not modify c's objects or held.
func (p *Program) Derive(ctx context.Context, c Change, held []string) Derivation {
	var d Derivation
	if len(p.derived) == 0 {
		return d
	}
	for _, cd := range p.derived {
		was := !cd.transition && slices.Contains(held, cd.name)
		now, err := p.evalCondition(ctx, cd.cond, c)
		if err != nil {
			n := p.evalErrorCount.Add(1)
			if d.Err == nil {
				d.Err, d.FirstError = fmt.Errorf("evaluate derived %s of %s: %w", cd.name, p.res, err), n == 1
			}
			now = was // unknown: keep what held
		} else if now && !was {
			d.Fired = append(d.Fired, cd.name)
		}
		if !cd.transition && now {
			d.Held = append(d.Held, cd.name)
		}
	}
	slices.Sort(d.Held)
	return d
}

// evalCondition evaluates one compiled expression for c.
func (p *Program) evalCondition(ctx context.Context, w *compiledWhen, c Change) (bool, error) {
	a := activationPool.Get().(*activation)
	*a = activation{object: c.Object, oldObject: c.Old, eventType: string(c.Type), origin: string(c.Origin)}
	out, _, err := w.prg.ContextEval(ctx, a)
	*a = activation{}
	activationPool.Put(a)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not bool", out.Type().TypeName())
	}
	return b, nil
}

// DerivedBody returns the body of derived event name for the shaped object obj: the
// object projected onto the event's fields. ok is false when the event has no projection
// (its body is the change's own) or p has no such event.
func (p *Program) DerivedBody(name string, obj map[string]any) (body []byte, ok bool, err error) {
	i := slices.IndexFunc(p.derived, func(cd compiledDerived) bool { return cd.name == name })
	if i < 0 || p.derived[i].project == nil {
		return nil, false, nil
	}
	v, _ := projectValue(obj, p.derived[i].project)
	if v == nil {
		v = map[string]any{}
	}
	body, err = json.Marshal(v)
	return body, true, err
}

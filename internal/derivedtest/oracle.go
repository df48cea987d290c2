// Package derivedtest tells, independently of the relay's engine, which derived events a
// sequence of changes must produce under a rules file's derived rules (docs/configuration.md,
// "Derived events"): tests replay the changes they observed through an Oracle and compare its
// answer with what the relay published.
//
// It reads only the resource and derived fields of the rules file and evaluates each condition
// with package filter's CEL environment (a when expression of the same text), so a condition
// behaves here exactly as it does in the relay. What it implements is the contract, not the
// engine: a condition that mentions oldObject is a transition (true for the change), any
// other a state (true now, and not for the previous state the relay saw, if any).
package derivedtest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
)

// File is the part of a rules file an Oracle reads.
type File struct {
	// Resources holds the rules in file order.
	Resources []Rule `json:"resources"`
}

// Rule is one resource's derived events.
type Rule struct {
	// Resource names the resource in kubectl spelling: pods, deployments.apps.
	Resource string `json:"resource"`
	// Derived holds the resource's derived events in file order.
	Derived []Derived `json:"derived"`
}

// Derived is one derived event of a rule.
type Derived struct {
	// Name is the event name, the subject's last token.
	Name string `json:"name"`
	// Condition is the CEL condition.
	Condition string `json:"condition"`
	// Fields is the body's projection; empty for the change's own body.
	Fields []string `json:"fields"`
}

// Load reads the rules file at path. Fields other than the ones File has are ignored.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return &f, nil
}

// condition is a compiled derived event.
type condition struct {
	name       string
	prg        *filter.Program
	transition bool
}

// Oracle evaluates the derived events of a rules file. It is safe for concurrent use.
type Oracle struct {
	byResource map[string][]condition
}

// NewOracle compiles every condition of f.
func NewOracle(f *File) (*Oracle, error) {
	o := &Oracle{byResource: make(map[string][]condition)}
	for _, r := range f.Resources {
		res, err := parseResource(r.Resource)
		if err != nil {
			return nil, err
		}
		for _, d := range r.Derived {
			when := d.Condition
			prg, err := filter.Compile(filter.Rule{When: &when}, res)
			if err != nil {
				return nil, fmt.Errorf("%s: derived %s: %w", r.Resource, d.Name, err)
			}
			// A rule with nothing but a when expression needs the old object exactly when
			// the expression mentions oldObject.
			o.byResource[key(res.Group, res.Resource)] = append(o.byResource[key(res.Group, res.Resource)],
				condition{name: d.Name, prg: prg, transition: prg.NeedsOld()})
		}
	}
	return o, nil
}

// Names returns the names of the derived events of group and resource, in file order.
func (o *Oracle) Names(group, resource string) []string {
	var names []string
	for _, c := range o.byResource[key(group, resource)] {
		names = append(names, c.name)
	}
	return names
}

// Transition reports whether the derived event name of group and resource is a transition.
func (o *Oracle) Transition(group, resource, name string) bool {
	for _, c := range o.byResource[key(group, resource)] {
		if c.name == name {
			return c.transition
		}
	}
	return false
}

// Fire returns the names of the derived events that change c of group and resource must
// produce, in file order. c.Old is the previous state the relay saw of the object, nil when
// it saw none. An evaluation error is returned: a library condition must never fail.
func (o *Oracle) Fire(ctx context.Context, group, resource string, c filter.Change) ([]string, error) {
	var names []string
	for _, cond := range o.byResource[key(group, resource)] {
		now, err := holds(ctx, cond, c)
		if err != nil {
			return nil, err
		}
		if !now {
			continue
		}
		if !cond.transition && c.Old != nil {
			// A state condition fires only when it did not hold for the previous state, an
			// object of the same type that still existed.
			before, err := holds(ctx, cond, filter.Change{Type: event.Modified, Origin: c.Origin, Object: c.Old})
			if err != nil {
				return nil, err
			}
			if before {
				continue
			}
		}
		names = append(names, cond.name)
	}
	return names, nil
}

func holds(ctx context.Context, cond condition, c filter.Change) (bool, error) {
	d := cond.prg.Decide(ctx, c)
	if d.Err != nil {
		return false, fmt.Errorf("derived %s: %w", cond.name, d.Err)
	}
	return d.Publish, nil
}

// parseResource splits kubectl's resource.group spelling (the library names no version).
func parseResource(s string) (event.Resource, error) {
	if s == "" {
		return event.Resource{}, fmt.Errorf("rule without a resource")
	}
	name, group, _ := strings.Cut(s, ".")
	return event.Resource{GroupVersionResource: schema.GroupVersionResource{Group: group, Resource: name}}, nil
}

func key(group, resource string) string { return resource + "." + group }

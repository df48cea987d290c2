package filter

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// CheckExpression type-checks expr, a when expression or a derived event's condition,
// with object and oldObject typed by s (dyn when s is nil or untyped), as
// ValidatingAdmissionPolicy checks its expressions against the schemas of the resources it
// matches: a field the schema does not declare, an operator applied to the wrong types, or
// a result that is not a bool, is a problem. It returns every problem with ExprLine,
// ExprColumn and Message set (the caller names the file, rule and field), or nil.
//
// Only the check is typed: evaluation stays dyn (Compile), so what the check accepts
// behaves as before, and the check accepts only what evaluation can run over the JSON
// values of objects of that schema (see Schema for where it is looser).
func CheckExpression(expr string, s *Schema) []Problem {
	var issues []celIssue
	if !s.Typed() {
		_, issues = compileWhen(expr)
	} else {
		issues = checkTyped(expr, s)
	}
	var out []Problem
	for _, iss := range issues {
		out = append(out, Problem{ExprLine: iss.line, ExprColumn: iss.column, Message: iss.message})
	}
	return out
}

// checkTyped compiles expr in an environment where object and oldObject have s's type.
func checkTyped(expr string, s *Schema) []celIssue {
	lib, err := celLibraryEnv()
	if err != nil {
		return []celIssue{{message: fmt.Sprintf("CEL environment: %v", err)}}
	}
	p := &schemaProvider{Provider: lib.CELTypeProvider(), structs: s.structs}
	env, err := lib.Extend(
		cel.CustomTypeProvider(p),
		// oldObject has object's type and may be null: comparing an object type with
		// null type-checks.
		cel.Variable(varObject, s.root),
		cel.Variable(varOldObject, s.root),
	)
	if err != nil {
		return []celIssue{{message: fmt.Sprintf("CEL environment: %v", err)}}
	}
	parsed, iss := env.Parse(expr)
	if iss.Err() != nil {
		return issuesOf(iss.Errors())
	}
	guarded := guardedSelects(parsed)
	ast, iss := env.Check(parsed)
	if iss.Err() != nil {
		var errs []*cel.Error
		for _, e := range iss.Errors() {
			if !guarded[e.ExprID] || !isUndefinedField(e.Message) {
				errs = append(errs, e)
			}
		}
		issues := issuesOf(errs)
		for i := range issues {
			issues[i].message += p.hint(issues[i].message) + nullHint(issues[i].message)
		}
		return issues
	}
	if issue, bad := checkOutput(ast); bad {
		return []celIssue{issue}
	}
	return nil
}

// schemaProvider declares the object types of a Schema to the CEL checker, and delegates
// every other type to the environment's provider. It records the fields it was asked for
// and does not have, to suggest the closest one.
type schemaProvider struct {
	types.Provider
	structs map[string]map[string]*types.Type
	misses  []fieldMiss
}

// fieldMiss is a field the checker looked up on an object type that has no such field.
type fieldMiss struct{ typeName, field string }

var _ types.Provider = (*schemaProvider)(nil)

// FindStructType implements types.Provider.
func (p *schemaProvider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Provider.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *schemaProvider) FindStructFieldNames(name string) ([]string, bool) {
	if fields, ok := p.structs[name]; ok {
		return slices.Sorted(maps.Keys(fields)), true
	}
	return p.Provider.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *schemaProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	fields, ok := p.structs[name]
	if !ok {
		return p.Provider.FindStructFieldType(name, field)
	}
	t, ok := fields[field]
	if !ok {
		p.misses = append(p.misses, fieldMiss{typeName: name, field: field})
		return nil, false
	}
	return &types.FieldType{Type: t}, true
}

// NewValue implements types.Provider. Object literals of schema types are not supported:
// the relay's values are JSON maps, not such objects.
func (p *schemaProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("cannot create an object of type %s", name)
	}
	return p.Provider.NewValue(name, fields)
}

// hint returns, for a checker message about an undefined field, the type that lacks it and
// the closest field it has (" on io.k8s.api.apps.v1.DeploymentSpec; did you mean
// 'replicas'?"); "" for other messages.
func (p *schemaProvider) hint(message string) string {
	field, ok := strings.CutPrefix(message, undefinedFieldPrefix)
	if !ok {
		return ""
	}
	field = strings.TrimSuffix(field, "'")
	for _, m := range p.misses {
		if m.field != field {
			continue
		}
		h := " on " + m.typeName
		if best := closest(field, slices.Sorted(maps.Keys(p.structs[m.typeName]))); best != "" {
			h += fmt.Sprintf("; did you mean '%s'?", best)
		}
		return h
	}
	return ""
}

// nullHint returns, for a checker message about comparing a typed field with null, how to
// test for a field that may be absent; "" for other messages. Only fields the schema marks
// nullable compare with null: an absent field is not null, it has no value.
func nullHint(message string) string {
	if strings.HasPrefix(message, "found no matching overload") &&
		(strings.Contains(message, ", null)'") || strings.Contains(message, "'(null, ")) {
		return "; test whether a field is set with has(object.a.b) or object.?a.?b, not with null"
	}
	return ""
}

// closest returns the name of names nearest to s in edit distance, if it is near enough to
// be a likely typo (at most a third of s's letters differ); "" otherwise.
func closest(s string, names []string) string {
	best, bestDist := "", len(s)/3+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ruleExpr is one CEL expression of a rule: the field that holds it and its text.
type ruleExpr struct{ field, expr string }

// ruleExpressions lists the CEL expressions written in r itself, in field order. Every
// field that holds CEL belongs here (and in inherited, if defaults may set it), so that
// CheckTypes checks it.
func ruleExpressions(r Rule) []ruleExpr {
	var out []ruleExpr
	if r.When != nil && *r.When != "" {
		out = append(out, ruleExpr{field: "when", expr: *r.When})
	}
	// Derived events are refused in defaults, so only a rule's own list holds conditions.
	for i, d := range r.Derived {
		if d.Condition != "" {
			out = append(out, ruleExpr{field: fmt.Sprintf("derived[%d].condition", i), expr: d.Condition})
		}
	}
	return out
}

// inherited lists the CEL expressions of defaults that apply to a resource whose own rule
// is own: when, unless own sets it (to "" for none).
func inherited(defaults, own Rule) []ruleExpr {
	if own.When != nil {
		return nil
	}
	return ruleExpressions(Rule{When: defaults.When})
}

// CheckTypes type-checks (CheckExpression) every CEL expression that applies to each of
// resources, spelled as in the file or as RELAY_RESOURCES lists it, against the schema of
// the same index: those it inherits from the defaults and the rule's own. It returns a
// *ValidationError whose problems name the rule that holds the expression ("defaults" for
// an inherited one, whose message then names the resource), the field and the position, or
// nil. The problems leave File empty: a File does not know its name, the caller does.
//
// A field the defaults read and a kind does not declare is a problem only when no resource
// with a typed schema that inherits the expression declares it: a typo fails for every
// kind, a field guarded by the kind (object.kind != "Pod" || object.spec.nodeName != "")
// for some. Those are returned as notes, for the log.
func (f *File) CheckTypes(resources []string, schemas []*Schema) (notes []Problem, err error) {
	ps := &problems{}
	type at struct {
		field        string
		line, column int
	}
	var undefined []Problem     // inherited undefined fields, not yet judged
	lacking := make(map[at]int) // resources that lack the field read at a position
	typed := 0                  // resources with a typed schema that inherit an expression
	for i, resource := range resources {
		own, name := f.rule(resource)
		inh := inherited(f.Defaults, own)
		if len(inh) > 0 && schemas[i].Typed() {
			typed++
		}
		for _, e := range inh {
			seen := make(map[at]bool)
			for _, p := range CheckExpression(e.expr, schemas[i]) {
				undef := isUndefinedField(p.Message)
				p.Rule, p.Field, p.Message = "defaults", e.field, "for "+resource+": "+p.Message
				if !undef {
					ps.list = append(ps.list, p)
					continue
				}
				if k := (at{e.field, p.ExprLine, p.ExprColumn}); !seen[k] {
					seen[k] = true
					lacking[k]++
				}
				undefined = append(undefined, p)
			}
		}
		for _, e := range ruleExpressions(own) {
			for _, p := range CheckExpression(e.expr, schemas[i]) {
				p.Rule, p.Field = name, e.field
				ps.list = append(ps.list, p)
			}
		}
	}
	for _, p := range undefined {
		if lacking[at{p.Field, p.ExprLine, p.ExprColumn}] == typed {
			ps.list = append(ps.list, p)
		} else {
			notes = append(notes, p)
		}
	}
	return notes, ps.err()
}

// HasExpressions reports whether any CEL expression applies to resource (see CheckTypes):
// only then does its schema matter for the rules.
func (f *File) HasExpressions(resource string) bool {
	own, _ := f.rule(resource)
	return len(inherited(f.Defaults, own))+len(ruleExpressions(own)) > 0
}

// rule returns the file's rule for resource and its name in problems; an empty rule named
// "defaults" when the file has none (the resource is only in RELAY_RESOURCES).
func (f *File) rule(resource string) (Rule, string) {
	for i, r := range f.Resources {
		if r.Resource == resource {
			return r, ruleName(i, r.Resource)
		}
	}
	return Rule{}, "defaults"
}

package filter

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a rules file or a rule.
type Problem struct {
	// File is the name given to Parse or Load; empty for a rule given
	// directly to Compile.
	File string
	// Rule names the rule: "defaults", "resources[2] (pods)" (or
	// "resources[2]" when it has no resource), the resource for Compile, or
	// "" for a problem of the file as a whole.
	Rule string
	// Field names the field, with an index for list elements: "when",
	// "quietFields[1]". Empty for a syntax error of the whole file.
	Field string
	// Line is the 1-based line in the file of a syntax error, 0 when
	// unknown. Problems of fields carry no file line.
	Line int
	// ExprLine and ExprColumn locate the problem inside the field's value
	// (1-based), for CEL expressions and field paths; 0 when unknown.
	ExprLine, ExprColumn int
	// Message says what is wrong.
	Message string
}

// String formats p as file:line: rule: field: exprLine:exprColumn: message,
// leaving out the parts that are unset.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	if p.Rule != "" {
		b.WriteString(p.Rule)
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	if p.ExprColumn > 0 {
		fmt.Fprintf(&b, "%d:%d: ", max(p.ExprLine, 1), p.ExprColumn)
	}
	b.WriteString(p.Message)
	return b.String()
}

// ValidationError lists every problem found in a rules file or rule.
type ValidationError struct {
	// Problems is never empty; problems are in file order.
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems for one file.
type problems struct {
	file string
	list []Problem
}

// add records a problem of field in rule.
func (ps *problems) add(rule, field, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: ps.file, Rule: rule, Field: field, Message: fmt.Sprintf(format, args...)})
}

// err returns the collected problems as a *ValidationError, or nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps.list}
}

package filter

import (
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// undefinedFieldPrefix starts the checker's message for a field a type does not declare.
const undefinedFieldPrefix = "undefined field '"

// guardedSelects returns the IDs of the field selections of parsed (not yet checked) that
// cannot fail at runtime for want of the field, so that an "undefined field" there is no
// problem: has() tests (has(object.status)), optional selections (object.?status), and the
// selections of a path that a has() in the same expression tests (object.status in
// !has(object.status) || object.status.phase == "Running"). Such guards are how a rule
// reads a field that only some kinds have; the schema check must not refuse them.
func guardedSelects(parsed *cel.Ast) map[int64]bool {
	guarded := make(map[int64]bool)
	tested := make(map[string]bool)
	var selects []celast.Expr
	celast.PreOrderVisit(celast.NavigateAST(parsed.NativeRep()), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			if e.AsSelect().IsTestOnly() {
				guarded[e.ID()] = true
				if p, ok := selectPath(e); ok {
					tested[p] = true
				}
				return
			}
			selects = append(selects, e)
		case celast.CallKind:
			if e.AsCall().FunctionName() == operators.OptSelect {
				guarded[e.ID()] = true
			}
		}
	}))
	for _, e := range selects {
		if p, ok := selectPath(e); ok && tested[p] {
			guarded[e.ID()] = true
		}
	}
	return guarded
}

// selectPath spells a chain of field selections on a variable (object.status.phase), false
// for any other expression.
func selectPath(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent(), true
	case celast.SelectKind:
		p, ok := selectPath(e.AsSelect().Operand())
		return p + "." + e.AsSelect().FieldName(), ok
	}
	return "", false
}

// isUndefinedField reports whether a checker message is about a field a type lacks.
func isUndefinedField(message string) bool {
	return strings.HasPrefix(message, undefinedFieldPrefix)
}

package filter

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// The CEL variables of a when expression. object and oldObject are named
// like in Kubernetes' own CEL (validation rules, admission policies).
const (
	varObject    = "object"
	varOldObject = "oldObject"
	varEventType = "eventType"
	varOrigin    = "origin"
)

const (
	// celCostLimit bounds the run-time cost of one evaluation, in CEL cost
	// units (roughly one per operation, one per list element or string
	// byte a function visits). Kubernetes allows 1,000,000 per admission
	// expression, about 0.1 s of CPU; a when expression runs for every
	// event on the relay's hot path, so it gets a tenth of that: enough to
	// walk a few thousand list elements (every container of a large Pod,
	// every condition), never more than about 10 ms of CPU per event.
	celCostLimit = 100_000

	// celInterruptCheckFrequency is how many comprehension iterations run
	// between two checks of the context, so that shutdown stops a long
	// evaluation without checking on every iteration.
	celInterruptCheckFrequency = 100
)

// celLibraryEnv is the CEL environment without object and oldObject, built once: building
// it is far more expensive than compiling an expression. celEnv declares them dyn for
// evaluation; CheckExpression declares them with the resource's schema.
var celLibraryEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(varEventType, cel.StringType),
		cel.Variable(varOrigin, cel.StringType),
		// Like Kubernetes: optional field access (object.?status.?phase),
		// int/uint/double comparisons (JSON numbers may decode as either),
		// UTC for timestamps, and the string, list, set, math and two
		// variable comprehension extensions.
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
		ext.Math(),
		ext.TwoVarComprehensions(),
	)
})

// celEnv is the shared CEL environment of evaluation: object and oldObject are dyn.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	lib, err := celLibraryEnv()
	if err != nil {
		return nil, err
	}
	return lib.Extend(
		cel.Variable(varObject, cel.DynType),
		cel.Variable(varOldObject, cel.DynType),
	)
})

// celIssue is a compile problem of a when expression.
type celIssue struct {
	line, column int // 1-based; 0 when unknown
	message      string
}

// compiledWhen is a compiled when expression.
type compiledWhen struct {
	prg     cel.Program
	usesOld bool
}

// compileWhen compiles expr. It returns the issues found, each with its
// position in expr.
func compileWhen(expr string) (*compiledWhen, []celIssue) {
	env, err := celEnv()
	if err != nil {
		return nil, []celIssue{{message: fmt.Sprintf("CEL environment: %v", err)}}
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, issuesOf(iss.Errors())
	}
	if issue, bad := checkOutput(ast); bad {
		return nil, []celIssue{issue}
	}
	prg, err := env.Program(ast,
		cel.EvalOptions(cel.OptOptimize),
		cel.CostLimit(celCostLimit),
		cel.InterruptCheckFrequency(celInterruptCheckFrequency),
	)
	if err != nil {
		return nil, []celIssue{{message: err.Error()}}
	}
	w := &compiledWhen{prg: prg}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == varOldObject {
			w.usesOld = true
		}
	}
	return w, nil
}

// issuesOf returns errs, each with its position.
func issuesOf(errs []*cel.Error) []celIssue {
	var out []celIssue
	for _, e := range errs {
		ci := celIssue{message: e.Message}
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			ci.line, ci.column = loc.Line(), loc.Column()+1
		}
		out = append(out, ci)
	}
	return out
}

// checkOutput reports an expression whose result is not a bool (dyn passes: it may be one).
func checkOutput(ast *cel.Ast) (celIssue, bool) {
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return celIssue{line: 1, column: 1, message: fmt.Sprintf("must evaluate to bool, not %s", t)}, true
	}
	return celIssue{}, false
}

// activation resolves the variables of one evaluation without building a
// map. Activations are pooled.
type activation struct {
	object, oldObject map[string]any
	eventType, origin string
}

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varObject:
		if a.object == nil {
			return types.NullValue, true
		}
		return a.object, true
	case varOldObject:
		if a.oldObject == nil {
			return types.NullValue, true
		}
		return a.oldObject, true
	case varEventType:
		return a.eventType, true
	case varOrigin:
		return a.origin, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

var activationPool = sync.Pool{New: func() any { return new(activation) }}

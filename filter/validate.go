package filter

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// ruleKind says where a rule comes from, which decides the checks of
// resource and redactSecrets.
type ruleKind int

const (
	kindDefaults ruleKind = iota // File.Defaults: no resource
	kindFile                     // an entry of File.Resources: resource required
	kindCompile                  // a rule given to Compile: resource ignored
)

// validateFile checks every rule of f, then the rules merged with the
// defaults, then that no resource appears twice. Rules whose index is in
// skip were not mappings and are not checked further.
func validateFile(ps *problems, f *File, skip map[int]bool) {
	validateRule(ps, "defaults", f.Defaults, kindDefaults)
	crossCheck(ps, "defaults", f.Defaults, f.Defaults)
	seen := make(map[string]int)
	for i, r := range f.Resources {
		if skip[i] {
			continue
		}
		name := ruleName(i, r.Resource)
		validateRule(ps, name, r, kindFile)
		crossCheck(ps, name, Merge(f.Defaults, r), r)
		if r.Resource == "" {
			continue
		}
		if j, dup := seen[r.Resource]; dup {
			ps.add(name, "resource", "duplicate: also in resources[%d]", j)
		} else {
			seen[r.Resource] = i
		}
	}
}

// validateRule checks each field of one rule on its own.
func validateRule(ps *problems, name string, r Rule, kind ruleKind) {
	switch {
	case kind == kindDefaults && r.Resource != "":
		ps.add(name, "resource", "not allowed in defaults")
	case kind == kindFile && r.Resource == "":
		ps.add(name, "resource", "required")
	case kind == kindFile:
		if msg := checkResourceSpelling(r.Resource); msg != "" {
			ps.add(name, "resource", "%s", msg)
		}
	}
	if r.LabelSelector != nil {
		if _, err := labels.Parse(*r.LabelSelector); err != nil {
			ps.add(name, "labelSelector", "%v", err)
		}
	}
	if r.FieldSelector != nil {
		if _, err := fields.ParseSelector(*r.FieldSelector); err != nil {
			ps.add(name, "fieldSelector", "%v", err)
		}
	}
	if r.NamespaceSelector != nil {
		if _, err := labels.Parse(*r.NamespaceSelector); err != nil {
			ps.add(name, "namespaceSelector", "%v", err)
		}
	}
	checkNamespaces(ps, name, "namespaces", r.Namespaces)
	checkNamespaces(ps, name, "excludeNamespaces", r.ExcludeNamespaces)
	if r.Events != nil && len(r.Events) == 0 {
		ps.add(name, "events", "empty: the rule would publish nothing (leave events out for all types)")
	}
	for i, e := range r.Events {
		if _, err := event.ParseType(e); err != nil {
			ps.add(name, fmt.Sprintf("events[%d]", i), "unknown event type %q (want added, modified or deleted)", e)
		}
	}
	if r.When != nil && *r.When != "" { // "" turns the defaults' when off
		for _, iss := range compileIssues(*r.When) {
			ps.list = append(ps.list, Problem{File: ps.file, Rule: name, Field: "when",
				ExprLine: iss.line, ExprColumn: iss.column, Message: iss.message})
		}
	}
	if kind == kindDefaults && r.Derived != nil {
		ps.add(name, "derived", "not allowed in defaults: derived events belong to one resource's rule")
	} else {
		checkDerived(ps, name, r.Derived)
	}
	if r.QuietUpdates != nil && !*r.QuietUpdates && len(r.QuietFields) > 0 {
		ps.add(name, "quietFields", "set while quietUpdates is false")
	}
	checkPaths(ps, name, "quietFields", r.QuietFields)
	checkPaths(ps, name, "fields", r.Fields)
	checkPaths(ps, name, "sensitive", r.Sensitive)
	if r.Payload != nil {
		switch *r.Payload {
		case PayloadObject, PayloadObjectAndOld, PayloadObjectAndPatch:
		default:
			ps.add(name, "payload", "unknown payload mode %q (want object, objectAndOld or objectAndPatch)", *r.Payload)
		}
	}
	switch {
	case r.RedactSecrets == nil:
	case kind == kindDefaults:
		ps.add(name, "redactSecrets", "not allowed in defaults: set it on the secrets rule itself")
	case kind == kindFile && !isCoreSecretsSpelling(r.Resource):
		ps.add(name, "redactSecrets", "only applies to secrets (core group); use sensitive for other resources")
	}
}

// crossCheck checks a rule merged with the defaults for conflicts between
// fields. own is the rule as written, so that a conflict that comes wholly
// from the defaults is reported once, on the defaults.
func crossCheck(ps *problems, name string, merged, own Rule) {
	if own.Namespaces != nil || own.ExcludeNamespaces != nil {
		for i, ns := range merged.ExcludeNamespaces {
			if slices.Contains(merged.Namespaces, ns) {
				ps.add(name, fmt.Sprintf("excludeNamespaces[%d]", i), "%q is also in namespaces", ns)
			}
		}
	}
	if (own.QuietUpdates != nil) != (own.QuietFields != nil) && // one from each
		merged.QuietUpdates != nil && !*merged.QuietUpdates && len(merged.QuietFields) > 0 {
		ps.add(name, "quietFields", "set while quietUpdates is false (set quietFields: [] to turn quiet updates off)")
	}
}

// compileIssues compiles a when expression and returns its problems.
func compileIssues(expr string) []celIssue {
	_, issues := compileWhen(expr)
	return issues
}

// checkNamespaces checks a list of namespace names.
func checkNamespaces(ps *problems, name, field string, list []string) {
	for i, ns := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			ps.add(name, f, "bad namespace %q: %s", ns, strings.Join(errs, "; "))
		} else if j := slices.Index(list, ns); j < i {
			ps.add(name, f, "duplicate: %q is also %s[%d]", ns, field, j)
		}
	}
}

// checkPaths checks a list of field paths.
func checkPaths(ps *problems, name, field string, list []string) {
	for i, s := range list {
		if _, err := ParsePath(s); err != nil {
			p := Problem{File: ps.file, Rule: name, Field: fmt.Sprintf("%s[%d]", field, i), Message: err.Error()}
			if pe := (*PathError)(nil); errors.As(err, &pe) {
				p.ExprLine, p.ExprColumn, p.Message = 1, pe.Offset+1, pe.Message
			}
			ps.list = append(ps.list, p)
		}
	}
}

// checkResourceSpelling checks a resource in kubectl spelling
// (resource[.version][.group]) and returns a problem or "". It is a
// syntax check only: the relay resolves the name against the server.
func checkResourceSpelling(s string) string {
	switch {
	case strings.ContainsAny(s, "/"):
		return fmt.Sprintf("bad resource %q: no \"/\" (write resource.version.group, e.g. deployments.apps; subresources cannot be watched)", s)
	case strings.ToLower(s) != s:
		return fmt.Sprintf("bad resource %q: must be lower case (the plural resource name, e.g. pods)", s)
	}
	if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
		return fmt.Sprintf("bad resource %q: %s", s, strings.Join(errs, "; "))
	}
	return ""
}

// isCoreSecretsSpelling reports whether the kubectl spelling s names the
// core group's secrets.
func isCoreSecretsSpelling(s string) bool {
	return s == "secrets" || s == "secrets.v1"
}

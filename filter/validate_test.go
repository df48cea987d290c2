package filter

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// wantProblem describes one expected problem; empty strings and zero
// numbers are not checked, except Rule and Field which always are.
type wantProblem struct {
	rule, field, msg        string
	line, exprLine, exprCol int
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want wantProblem
	}{
		{name: "yaml syntax", in: "resources:\n - resource: a\n  - b: c\n",
			want: wantProblem{msg: "syntax", line: 2}},
		{name: "yaml tab", in: "resources:\n\t- resource: a\n",
			want: wantProblem{msg: "syntax", line: 2}},
		{name: "duplicate yaml key", in: "resources:\n - resource: pods\n   resource: pods\n",
			want: wantProblem{msg: "syntax"}},
		{name: "json syntax", in: `{"resources": [}`,
			want: wantProblem{msg: "syntax"}},
		{name: "not a mapping", in: "- a\n- b\n",
			want: wantProblem{msg: "must be a mapping"}},
		{name: "unknown top-level field", in: "resource: pods\n",
			want: wantProblem{field: "resource", msg: "unknown field"}},
		{name: "resources not a list", in: "resources: pods\n",
			want: wantProblem{field: "resources", msg: "list of rules"}},
		{name: "defaults not a mapping", in: "defaults: [a]\n",
			want: wantProblem{rule: "defaults", msg: "must be a mapping"}},
		{name: "rule not a mapping", in: "resources: [pods]\n",
			want: wantProblem{rule: "resources[0]", msg: "must be a mapping"}},
		{name: "unknown field", in: "resources:\n- resource: pods\n  labelSelectors: a=b\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "labelSelectors", msg: "unknown field"}},
		{name: "field names are case-sensitive", in: "resources:\n- resource: pods\n  LabelSelector: a=b\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "LabelSelector", msg: "unknown field"}},
		{name: "unknown field in defaults", in: "defaults:\n  quiet: true\n",
			want: wantProblem{rule: "defaults", field: "quiet", msg: "unknown field"}},
		{name: "wrong type string", in: "resources:\n- resource: pods\n  when: [a]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "when", msg: "must be a string, got array"}},
		{name: "wrong type list", in: "resources:\n- resource: pods\n  events: added\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "events", msg: "must be a list of strings, got string"}},
		{name: "wrong type bool", in: "resources:\n- resource: pods\n  quietUpdates: sometimes\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "quietUpdates", msg: "must be true or false"}},
		{name: "resource not a string", in: "resources:\n- resource: 3\n",
			want: wantProblem{rule: "resources[0]", field: "resource", msg: "must be a string, got number"}},
		{name: "missing resource", in: "resources:\n- events: [added]\n",
			want: wantProblem{rule: "resources[0]", field: "resource", msg: "required"}},
		{name: "resource in defaults", in: "defaults:\n  resource: pods\n",
			want: wantProblem{rule: "defaults", field: "resource", msg: "not allowed in defaults"}},
		{name: "duplicate resource", in: "resources:\n- resource: pods\n- resource: deployments.apps\n- resource: pods\n",
			want: wantProblem{rule: "resources[2] (pods)", field: "resource", msg: "duplicate: also in resources[0]"}},
		{name: "resource upper case", in: "resources:\n- resource: Pods\n",
			want: wantProblem{rule: "resources[0] (Pods)", field: "resource", msg: "lower case"}},
		{name: "resource with slash", in: "resources:\n- resource: pods/status\n",
			want: wantProblem{rule: "resources[0] (pods/status)", field: "resource", msg: `no "/"`}},
		{name: "resource with space", in: "resources:\n- resource: 'pods x'\n",
			want: wantProblem{rule: `resources[0] ("pods x")`, field: "resource", msg: "bad resource"}},
		{name: "resource with empty part", in: "resources:\n- resource: deployments..apps\n",
			want: wantProblem{rule: "resources[0] (deployments..apps)", field: "resource", msg: "bad resource"}},
		{name: "bad label selector", in: "resources:\n- resource: pods\n  labelSelector: 'app in (a'\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "labelSelector"}},
		{name: "bad field selector", in: "resources:\n- resource: pods\n  fieldSelector: 'status.phase'\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "fieldSelector"}},
		{name: "bad namespace selector", in: "resources:\n- resource: pods\n  namespaceSelector: '!!'\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "namespaceSelector"}},
		{name: "bad namespace", in: "resources:\n- resource: pods\n  namespaces: [default, Prod]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "namespaces[1]", msg: `bad namespace "Prod"`}},
		{name: "bad excluded namespace", in: "resources:\n- resource: pods\n  excludeNamespaces: [kube.system]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "excludeNamespaces[0]", msg: "bad namespace"}},
		{name: "namespace listed twice", in: "resources:\n- resource: pods\n  namespaces: [a, b, a]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "namespaces[2]", msg: "duplicate"}},
		{name: "namespace included and excluded", in: "resources:\n- resource: pods\n  namespaces: [a, b]\n  excludeNamespaces: [c, b]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "excludeNamespaces[1]", msg: `"b" is also in namespaces`}},
		{name: "namespace excluded by rule included by defaults", in: "defaults:\n  namespaces: [a]\nresources:\n- resource: pods\n  excludeNamespaces: [a]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "excludeNamespaces[0]", msg: "also in namespaces"}},
		{name: "namespace conflict in defaults", in: "defaults:\n  namespaces: [a]\n  excludeNamespaces: [a]\n",
			want: wantProblem{rule: "defaults", field: "excludeNamespaces[0]", msg: "also in namespaces"}},
		{name: "unknown event type", in: "resources:\n- resource: pods\n  events: [added, updated]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "events[1]", msg: `unknown event type "updated"`}},
		{name: "upper-case event type", in: "resources:\n- resource: pods\n  events: [ADDED]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "events[0]", msg: "unknown event type"}},
		{name: "empty events", in: "resources:\n- resource: pods\n  events: []\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "events", msg: "empty"}},
		{name: "cel syntax", in: "resources:\n- resource: pods\n  when: 'object.status.phase =='\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "when", msg: "Syntax error", exprLine: 1, exprCol: 23}},
		{name: "cel undeclared", in: "resources:\n- resource: pods\n  when: 'object.x == objet.x'\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "when", msg: "undeclared reference to 'objet'", exprLine: 1, exprCol: 13}},
		{name: "cel multi-line position", in: "resources:\n- resource: pods\n  when: |-\n    object.x == 1 &&\n      bogus\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "when", msg: "undeclared reference to 'bogus'", exprLine: 2, exprCol: 3}},
		{name: "cel wrong type", in: "resources:\n- resource: pods\n  when: 'eventType + \"x\"'\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "when", msg: "must evaluate to bool, not string", exprLine: 1, exprCol: 1}},
		{name: "cel no such overload", in: "resources:\n- resource: pods\n  when: 'eventType > 1'\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "when", msg: "no matching overload", exprLine: 1, exprCol: 11}},
		{name: "cel in defaults", in: "defaults:\n  when: 'x'\n",
			want: wantProblem{rule: "defaults", field: "when", msg: "undeclared reference", exprLine: 1, exprCol: 1}},
		{name: "quiet fields while quiet updates off", in: "resources:\n- resource: pods\n  quietUpdates: false\n  quietFields: [status.x]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "quietFields", msg: "quietUpdates is false"}},
		{name: "quiet fields while defaults turn quiet off", in: "defaults:\n  quietUpdates: false\nresources:\n- resource: pods\n  quietFields: [status.x]\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "quietFields", msg: "quietUpdates is false"}},
		{name: "bad quiet field", in: "resources:\n- resource: pods\n  quietFields: [status.x, 'a..b']\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "quietFields[1]", msg: "empty segment", exprLine: 1, exprCol: 3}},
		{name: "bad projected field", in: "resources:\n- resource: pods\n  fields: ['metadata.annotations[\"a']\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "fields[0]", msg: "unterminated", exprLine: 1, exprCol: 22}},
		{name: "bad sensitive field", in: "resources:\n- resource: pods\n  sensitive: ['spec.*.token']\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "sensitive[0]", msg: `bare "*"`, exprLine: 1, exprCol: 6}},
		{name: "empty field path", in: "resources:\n- resource: pods\n  fields: ['']\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "fields[0]", msg: "empty path", exprLine: 1, exprCol: 1}},
		{name: "unknown payload", in: "resources:\n- resource: pods\n  payload: patch\n",
			want: wantProblem{rule: "resources[0] (pods)", field: "payload", msg: `unknown payload mode "patch"`}},
		{name: "redactSecrets on another resource", in: "resources:\n- resource: configmaps\n  redactSecrets: false\n",
			want: wantProblem{rule: "resources[0] (configmaps)", field: "redactSecrets", msg: "only applies to secrets"}},
		{name: "redactSecrets on secrets of another group", in: "resources:\n- resource: secrets.example.com\n  redactSecrets: false\n",
			want: wantProblem{rule: "resources[0] (secrets.example.com)", field: "redactSecrets", msg: "only applies to secrets"}},
		{name: "redactSecrets in defaults", in: "defaults:\n  redactSecrets: false\n",
			want: wantProblem{rule: "defaults", field: "redactSecrets", msg: "not allowed in defaults"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("rules.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse = %+v, nil; want a problem", f)
			}
			if f != nil {
				t.Errorf("Parse returned a File with an error")
			}
			checkProblem(t, err, "rules.yaml", tt.want)
		})
	}
}

// checkProblem fails unless err is a *ValidationError with a problem as
// described by want, and its Error text names file, rule and field.
func checkProblem(t *testing.T, err error, file string, want wantProblem) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	for _, p := range ve.Problems {
		if p.File != file || p.Rule != want.rule || p.Field != want.field || !strings.Contains(p.Message, want.msg) {
			continue
		}
		if want.line != 0 && p.Line != want.line {
			t.Errorf("line %d, want %d: %s", p.Line, want.line, p)
		}
		if want.exprCol != 0 && (p.ExprLine != want.exprLine || p.ExprColumn != want.exprCol) {
			t.Errorf("position %d:%d, want %d:%d: %s", p.ExprLine, p.ExprColumn, want.exprLine, want.exprCol, p)
		}
		line := p.String()
		if !strings.Contains(ve.Error(), line) {
			t.Errorf("Error() %q lacks %q", ve.Error(), line)
		}
		for _, part := range []string{file, want.rule, want.field} {
			if !strings.Contains(line, part) {
				t.Errorf("problem %q does not name %q", line, part)
			}
		}
		return
	}
	t.Fatalf("no problem with rule %q field %q message ~%q in:\n%v", want.rule, want.field, want.msg, err)
}

func TestParseListsEveryProblem(t *testing.T) {
	in := `
defaults:
  bogus: 1
resources:
  - resource: pods
    events: [added, updated]
    when: 'objet.x'
    fields: ["a..b", "ok", "c["]
  - resource: pods
`
	_, err := Parse("rules.yaml", []byte(in))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	want := []string{
		"rules.yaml: defaults: bogus: unknown field",
		"rules.yaml: resources[0] (pods): events[1]: unknown event type",
		"rules.yaml: resources[0] (pods): when: 1:1: undeclared reference to 'objet'",
		"rules.yaml: resources[0] (pods): fields[0]: 1:3: empty segment",
		"rules.yaml: resources[0] (pods): fields[2]: 1:2: unterminated",
		"rules.yaml: resources[1] (pods): resource: duplicate",
	}
	lines := strings.Split(ve.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(want), ve)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestCompileProblems(t *testing.T) {
	pods := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
	secrets := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}
	tests := []struct {
		name string
		rule Rule
		res  event.Resource
		want wantProblem
	}{
		{name: "redactSecrets on pods", rule: Rule{RedactSecrets: new(false)}, res: pods,
			want: wantProblem{rule: "pods.v1", field: "redactSecrets", msg: "only applies to secrets"}},
		{name: "redactSecrets on secrets of another group", rule: Rule{RedactSecrets: new(false)},
			res:  event.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "secrets"}},
			want: wantProblem{rule: "secrets.v1.example.com", field: "redactSecrets", msg: "only applies to secrets"}},
		{name: "bad when", rule: Rule{When: new("object.")}, res: secrets,
			want: wantProblem{rule: "secrets.v1", field: "when", msg: "Syntax error", exprLine: 1, exprCol: 8}},
		{name: "bad path", rule: Rule{Sensitive: []string{"a["}}, res: pods,
			want: wantProblem{rule: "pods.v1", field: "sensitive[0]", msg: "unterminated"}},
		{name: "include and exclude", rule: Rule{Namespaces: []string{"a"}, ExcludeNamespaces: []string{"a"}}, res: pods,
			want: wantProblem{rule: "pods.v1", field: "excludeNamespaces[0]", msg: "also in namespaces"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.rule, tt.res)
			if err == nil {
				t.Fatalf("Compile = %v, nil; want a problem", p)
			}
			checkProblem(t, err, "", tt.want)
		})
	}
}

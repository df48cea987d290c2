package filter

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// loadOpenAPI reads a fixture OpenAPI v3 document from testdata.
func loadOpenAPI(t testing.TB, name string) *OpenAPI {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseOpenAPI(data)
	if err != nil {
		t.Fatalf("ParseOpenAPI: %v", err)
	}
	return doc
}

// deploymentSchema is the typing of apps/v1 Deployments from the fixture document.
func deploymentSchema(t testing.TB) *Schema {
	t.Helper()
	doc := loadOpenAPI(t, "openapi-apps-v1.json")
	s := doc.Schema(doc.Component(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}))
	if !s.Typed() {
		t.Fatalf("Deployment schema is untyped")
	}
	return s
}

// sampleDeployment is a Deployment as the relay decodes it from JSON.
const sampleDeployment = `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "default", "generation": 3, "labels": {"app": "web"},
    "creationTimestamp": "2026-01-02T03:04:05Z"},
  "spec": {"replicas": 3, "paused": false, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
  "status": {"observedGeneration": 3, "readyReplicas": 3, "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}
}`

func TestCheckExpressionAcceptsWhatEvaluationRuns(t *testing.T) {
	s := deploymentSchema(t)
	var obj map[string]any
	if err := json.Unmarshal([]byte(sampleDeployment), &obj); err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{
		`object.spec.replicas > 1`,
		`oldObject == null || oldObject.spec.replicas != object.spec.replicas`,
		`object.?spec.?replicas.orValue(0) >= 1`,
		`has(object.spec.paused) && !object.spec.paused`,
		`object.metadata.namespace == "default" && object.metadata.labels["app"] == "web"`,
		`"app" in object.metadata.labels`,
		`object.status.conditions.exists(c, c.type == "Available" && c.status == "True")`,
		`object.metadata.creationTimestamp.startsWith("2026")`,
		`timestamp(object.metadata.creationTimestamp) > timestamp("2025-01-01T00:00:00Z")`,
		`object.spec.strategy.rollingUpdate.maxSurge == "25%"`,
		`object.spec.strategy.rollingUpdate.maxUnavailable == 1`,
		`object.spec.template.spec.containers.all(c, c.image != "")`,
		`object.metadata.generation == object.status.observedGeneration`,
		`object.spec.replicas > 1.5`,
		`eventType == "added" || origin == "relist"`,
		`object.kind == "Deployment" && object.apiVersion == "apps/v1"`,
		// docs/configuration.md's examples.
		`object.metadata.?labels["tier"].orValue("") != "prod"`,
		`eventType == "deleted" || object.spec.replicas != oldObject.?spec.?replicas.orValue(-1)`,
		// Guarded reads of fields the kind does not declare run (to false or the default):
		// docs/configuration.md tells users to write exactly these for defaults.
		`object.?status.?phase.orValue("") != "Succeeded"`,
		`!has(object.status.phase) || object.status.phase == "Running"`,
		`!has(object.data) || object.data.size() > 0`,
		`!has(object.data) || object.data.key == "x"`,
		`has(object.spec.nodeName) ? object.spec.nodeName != "" : true`,
		`object.?data.?key.orValue("") == ""`,
	} {
		t.Run(expr, func(t *testing.T) {
			if got := CheckExpression(expr, s); got != nil {
				t.Fatalf("CheckExpression: got %v, want no problems", got)
			}
			// What the check accepts, evaluation runs over the JSON object.
			p := mustCompile(t, Rule{When: &expr}, event.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}})
			if d := p.Decide(context.Background(), Change{Type: event.Modified, Origin: event.Live, Object: obj}); d.Err != nil {
				t.Fatalf("evaluation: %v", d.Err)
			}
		})
	}
}

func TestCheckExpressionReportsFieldTyposAndTypeErrorsWithPosition(t *testing.T) {
	s := deploymentSchema(t)
	tests := []struct {
		name       string
		expr       string
		line, col  int
		wantInMsgs []string
	}{
		{name: "misspelled field", expr: `object.spec.replica > 1`, line: 1, col: 12,
			wantInMsgs: []string{"undefined field 'replica'", "io.k8s.api.apps.v1.DeploymentSpec", "did you mean 'replicas'"}},
		{name: "misspelled field in oldObject on line 2", expr: "oldObject != null &&\n  oldObject.status.readyReplica != 0", line: 2, col: 19,
			wantInMsgs: []string{"undefined field 'readyReplica'", "did you mean 'readyReplicas'"}},
		{name: "field of a list element", expr: `object.status.conditions.exists(c, c.typ == "Ready")`, line: 1, col: 37,
			wantInMsgs: []string{"undefined field 'typ'", "did you mean 'type'"}},
		{name: "int compared with string", expr: `object.spec.replicas == "3"`, line: 1, col: 22,
			wantInMsgs: []string{"no matching overload", "(int, string)"}},
		{name: "selection on a bool", expr: `object.spec.paused.value`, line: 1, col: 19,
			wantInMsgs: []string{"does not support field selection"}},
		{name: "not a bool", expr: `object.metadata.name`, line: 1, col: 1,
			wantInMsgs: []string{"must evaluate to bool, not string"}},
		{name: "unknown variable", expr: `obj.spec.replicas > 1`, line: 1, col: 1,
			wantInMsgs: []string{"undeclared reference to 'obj'"}},
		{name: "a typo next to a has() of another path", expr: `has(object.spec) && object.spec.replica > 1`, line: 1, col: 32,
			wantInMsgs: []string{"undefined field 'replica'", "did you mean 'replicas'"}},
		{name: "a field far from any", expr: `object.spec.colour == "red"`, line: 1, col: 12,
			wantInMsgs: []string{"undefined field 'colour'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckExpression(tt.expr, s)
			if len(got) != 1 {
				t.Fatalf("got %d problems %v, want 1", len(got), got)
			}
			p := got[0]
			if p.ExprLine != tt.line || p.ExprColumn != tt.col {
				t.Errorf("position: got %d:%d, want %d:%d", p.ExprLine, p.ExprColumn, tt.line, tt.col)
			}
			for _, want := range tt.wantInMsgs {
				if !strings.Contains(p.Message, want) {
					t.Errorf("message %q does not contain %q", p.Message, want)
				}
			}
			if tt.name == "a field far from any" && strings.Contains(p.Message, "did you mean") {
				t.Errorf("message %q suggests a field that is not a likely typo", p.Message)
			}
		})
	}
}

func TestCheckExpressionUntypedChecksOnlySyntaxVariablesAndResult(t *testing.T) {
	gadget := loadOpenAPI(t, "openapi-crd.json").Schema("com.example.v1.Gadget")
	if gadget.Typed() {
		t.Fatalf("Gadget schema is typed, want untyped (preserve-unknown-fields root)")
	}
	for _, s := range []*Schema{nil, gadget} {
		if got := CheckExpression(`object.spec.anything.at.all == "x"`, s); got != nil {
			t.Errorf("untyped: got %v, want no problems", got)
		}
		if got := CheckExpression(`object.spec.(`, s); len(got) == 0 {
			t.Errorf("untyped: got no problems for a syntax error")
		}
		if got := CheckExpression(`"string"`, s); len(got) != 1 || !strings.Contains(got[0].Message, "must evaluate to bool") {
			t.Errorf("untyped: got %v, want the result type problem", got)
		}
	}
}

func TestSchemaLeavesOpenWhatTheSchemaLeavesOpen(t *testing.T) {
	doc := loadOpenAPI(t, "openapi-crd.json")
	s := doc.Schema(doc.Component(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}))
	if !s.Typed() || s.TypeName() != "com.example.v1.Widget" {
		t.Fatalf("Widget: got typed %v type %s, want typed com.example.v1.Widget", s.Typed(), s.TypeName())
	}
	tests := []struct {
		expr string
		ok   bool
	}{
		{`object.spec.size > 2`, true},
		{`object.spec.sizes > 2`, false},
		{`object.metadata.name == "w"`, true},
		{`object.metadata.nam == "w"`, false},
		// preserve-unknown-fields: any field.
		{`object.spec.config.replicas.max > 1`, true},
		// number: JSON numbers decode as int or double, so both compare.
		{`object.spec.ratio == 1 || object.spec.ratio == 0.5`, true},
		// a property CEL cannot select: the object is a map read with ["..."].
		{`object.spec.labels["x-team"] == "a"`, true},
		// an embedded resource has apiVersion, kind and metadata.
		{`object.spec.template.kind == "Pod" && object.spec.template.spec.image != ""`, true},
		{`object.spec.template.spec.imag != ""`, false},
		// no type: anything.
		{`object.spec.anything.x == 1`, true},
		// a component containing itself.
		{`object.spec.tree.children.exists(c, c.children.exists(d, d.name == "leaf"))`, true},
		{`object.spec.tree.children.exists(c, c.nme == "leaf")`, false},
		{`object.spec.color == 3`, false},
		// nullable: a scalar compares with null and keeps its type; a list or map is open.
		{`object.spec.nick == null || object.spec.nick.startsWith("x")`, true},
		{`object.spec.count == null || object.spec.count > 2`, true},
		{`object.spec.count == "2"`, false},
		{`object.spec.tags == null || object.spec.tags.size() > 0`, true},
		{`object.spec.extra == null || object.spec.extra["k"] == "v"`, true},
		{`object.spec.color == null`, false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got := CheckExpression(tt.expr, s)
			if tt.expr == `object.spec.color == null` && (len(got) != 1 || !strings.Contains(got[0].Message, "has(")) {
				t.Errorf("comparing a non-nullable field with null: got %v, want a hint to use has()", got)
			}
			if (got == nil) != tt.ok {
				t.Errorf("got %v, want ok %v", got, tt.ok)
			}
		})
	}
}

func TestOpenAPIComponentByGroupVersionKind(t *testing.T) {
	doc := loadOpenAPI(t, "openapi-apps-v1.json")
	tests := []struct {
		gvk  schema.GroupVersionKind
		want string
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "io.k8s.api.apps.v1.Deployment"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"}, "io.k8s.api.apps.v1.DeploymentList"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1beta1", Kind: "Deployment"}, ""},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, ""},
	}
	for _, tt := range tests {
		if got := doc.Component(tt.gvk); got != tt.want {
			t.Errorf("Component(%v): got %q, want %q", tt.gvk, got, tt.want)
		}
	}
	if s := doc.Schema("io.k8s.api.apps.v1.NoSuch"); s.Typed() {
		t.Errorf("Schema of a missing component: got typed, want untyped")
	}
	if _, err := ParseOpenAPI([]byte(`{"components": [`)); err == nil {
		t.Errorf("ParseOpenAPI of broken JSON: got no error")
	}
}

func TestFileCheckTypesNamesRuleFieldAndPosition(t *testing.T) {
	f, err := Parse("rules.yaml", []byte(`
defaults:
  when: object.metadata.nme != ""
resources:
  - resource: pods
  - resource: deployments.apps
    when: |-
      eventType == "modified" &&
        object.spec.replica > 1
  - resource: configmaps
    when: ""
`))
	if err != nil {
		t.Fatal(err)
	}
	s := deploymentSchema(t)
	resources := []string{"deployments.apps", "pods", "statefulsets.apps", "configmaps"}
	notes, err := f.CheckTypes(resources, []*Schema{s, s, s, s})
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	var got []string
	for _, p := range verr.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"resources[1] (deployments.apps): when: 2:14: undefined field 'replica' on io.k8s.api.apps.v1.DeploymentSpec; did you mean 'replicas'?",
		"defaults: when: 1:16: for pods: undefined field 'nme' on io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta; did you mean 'name'?",
		"defaults: when: 1:16: for statefulsets.apps: undefined field 'nme' on io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta; did you mean 'name'?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if notes != nil {
		t.Errorf("notes: got %v, want none", notes)
	}
	for _, r := range resources {
		if has := f.HasExpressions(r); has != (r != "configmaps") {
			t.Errorf("HasExpressions(%s): got %v", r, has)
		}
	}
}

func TestFileCheckTypesRefusesADefaultsFieldOnlyWhenNoKindDeclaresIt(t *testing.T) {
	f, err := Parse("rules.yaml", []byte(`
defaults:
  when: object.kind != "Widget" || object.spec.size > 1
resources:
  - resource: deployments.apps
  - resource: widgets.example.com
  - resource: gadgets.example.com
`))
	if err != nil {
		t.Fatal(err)
	}
	crd := loadOpenAPI(t, "openapi-crd.json")
	resources := []string{"deployments.apps", "widgets.example.com", "gadgets.example.com"}
	schemas := []*Schema{deploymentSchema(t), crd.Schema("com.example.v1.Widget"), crd.Schema("com.example.v1.Gadget")}
	notes, err := f.CheckTypes(resources, schemas)
	if err != nil {
		t.Fatalf("a field only some kinds declare: got %v, want no error", err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0].String(), "defaults: when: 1:39: for deployments.apps: undefined field 'size'") {
		t.Errorf("notes: got %v, want one for deployments.apps", notes)
	}

	// The same rules, but every typed kind lacks the field: a typo.
	_, err = f.CheckTypes(resources[:1], schemas[:1])
	if err == nil || !strings.Contains(err.Error(), "undefined field 'size'") {
		t.Errorf("a field no kind declares: got %v, want undefined field 'size'", err)
	}
}

// FuzzOpenAPISchema feeds documents the apiserver could publish (CRD schemas are anyone's)
// through parsing, conversion and a check: none may panic or hang, and a schema whose root
// is typed has the object's identity fields.
func FuzzOpenAPISchema(f *testing.F) {
	for _, name := range []string{"openapi-apps-v1.json", "openapi-crd.json"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"components":{"schemas":{"a":{"$ref":"#/components/schemas/a","x-kubernetes-group-version-kind":[{"group":"g","version":"v1","kind":"K"}]}}}}`))
	f.Add([]byte(`{"components":{"schemas":{"a":{"type":"array","items":{"$ref":"#/components/schemas/a"},"x-kubernetes-group-version-kind":[{"group":"g","version":"v1","kind":"K"}]}}}}`))
	f.Add([]byte(`{"components":{"schemas":{"a":{"type":"object","properties":{"in":{"type":"string"},"é":{}},"x-kubernetes-group-version-kind":[{"group":"g","version":"v1","kind":"K"}]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ParseOpenAPI(data)
		if err != nil {
			return
		}
		s := doc.Schema(doc.Component(schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "K"}))
		_ = CheckExpression(`object.spec.x == 1 && oldObject == null`, s)
		if s.Typed() {
			if got := CheckExpression(`object.apiVersion != "" && object.kind != "" && has(object.metadata)`, s); got != nil {
				t.Errorf("typed root without identity fields: %v", got)
			}
		}
	})
}

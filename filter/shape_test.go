package filter

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

var (
	podsRes    = event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}
	secretsRes = event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}
	cmRes      = event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
)

// obj decodes a JSON object the way the relay does.
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

// deepCopy copies a decoded JSON object through JSON.
func deepCopy(t testing.TB, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return obj(t, string(b))
}

const secretJSON = `{
	"apiVersion": "v1", "kind": "Secret",
	"metadata": {"name": "db", "namespace": "prod", "uid": "u1", "resourceVersion": "7",
		"labels": {"app": "db"},
		"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"aHVudGVyMg==\"}}", "team": "a"},
		"managedFields": [{"manager": "kubectl"}]},
	"type": "Opaque",
	"data": {"password": "aHVudGVyMg==", "user": "YWRtaW4="},
	"stringData": {"token": "abc"}
}`

const podJSON = `{
	"apiVersion": "v1", "kind": "Pod",
	"metadata": {"name": "web-1", "namespace": "prod", "uid": "u2", "resourceVersion": "42", "generation": 3,
		"labels": {"app": "web"},
		"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
		"managedFields": [{"manager": "kubelet", "time": "2026-01-01T00:00:00Z"}]},
	"spec": {"nodeName": "n1", "token": "s3cret",
		"containers": [{"name": "app", "image": "web:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
			{"name": "side", "image": "side:1"}]},
	"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"}]}
}`

func TestShape(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		res  event.Resource
		in   string
		want string
	}{
		{name: "default strips managedFields and last-applied", res: podsRes,
			in:   `{"metadata": {"name": "a", "managedFields": [1], "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "x": "y"}}}`,
			want: `{"metadata": {"name": "a", "annotations": {"x": "y"}}}`},
		{name: "annotations emptied are removed", res: podsRes,
			in:   `{"metadata": {"name": "a", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}`,
			want: `{"metadata": {"name": "a"}}`},
		{name: "strip turned off", res: podsRes, rule: Rule{StripManagedFields: new(false), StripLastApplied: new(false)},
			in:   `{"metadata": {"name": "a", "managedFields": [1], "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}`,
			want: `{"metadata": {"name": "a", "managedFields": [1], "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}`},
		{name: "no metadata", res: podsRes, in: `{"spec": {}}`, want: `{"spec": {}}`},
		{name: "secret redacted by default", res: secretsRes, in: secretJSON,
			want: `{"apiVersion": "v1", "kind": "Secret",
				"metadata": {"name": "db", "namespace": "prod", "uid": "u1", "resourceVersion": "7", "labels": {"app": "db"}, "annotations": {"team": "a"}},
				"type": "Opaque", "data": {"password": "", "user": ""}, "stringData": {"token": ""}}`},
		{name: "secret redacted removes last-applied even when kept otherwise", res: secretsRes, rule: Rule{StripLastApplied: new(false), StripManagedFields: new(false)},
			in: secretJSON,
			want: `{"apiVersion": "v1", "kind": "Secret",
				"metadata": {"name": "db", "namespace": "prod", "uid": "u1", "resourceVersion": "7", "labels": {"app": "db"}, "annotations": {"team": "a"},
					"managedFields": [{"manager": "kubectl"}]},
				"type": "Opaque", "data": {"password": "", "user": ""}, "stringData": {"token": ""}}`},
		{name: "secret opt-out publishes values", res: secretsRes, rule: Rule{RedactSecrets: new(false), StripLastApplied: new(false)},
			in: secretJSON,
			want: `{"apiVersion": "v1", "kind": "Secret",
				"metadata": {"name": "db", "namespace": "prod", "uid": "u1", "resourceVersion": "7", "labels": {"app": "db"},
					"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"aHVudGVyMg==\"}}", "team": "a"}},
				"type": "Opaque", "data": {"password": "aHVudGVyMg==", "user": "YWRtaW4="}, "stringData": {"token": "abc"}}`},
		{name: "configmap data is not redacted", res: cmRes,
			in: `{"data": {"a": "b"}}`, want: `{"data": {"a": "b"}}`},
		{name: "sensitive scalar, map and list", res: cmRes, rule: Rule{Sensitive: []string{"data.key", "binaryData", "spec.list", "spec.missing"}},
			in:   `{"data": {"key": "v", "other": "w"}, "binaryData": {"x": "eA==", "y": {"z": 1}}, "spec": {"list": [1, 2], "keep": 1}}`,
			want: `{"data": {"key": "", "other": "w"}, "binaryData": {"x": "", "y": ""}, "spec": {"list": "", "keep": 1}}`},
		{name: "sensitive null stays null", res: cmRes, rule: Rule{Sensitive: []string{"data.key"}},
			in: `{"data": {"key": null}}`, want: `{"data": {"key": null}}`},
		{name: "sensitive with wildcards", res: podsRes, rule: Rule{Sensitive: []string{"spec.containers[*].env[*].value", `metadata.annotations["team"]`}},
			in:   `{"metadata": {"annotations": {"team": "a", "x": "b"}}, "spec": {"containers": [{"env": [{"name": "A", "value": "1"}, {"name": "B"}]}, {"name": "c"}]}}`,
			want: `{"metadata": {"annotations": {"team": "", "x": "b"}}, "spec": {"containers": [{"env": [{"name": "A", "value": ""}, {"name": "B"}]}, {"name": "c"}]}}`},
		{name: "projection keeps identity fields", res: podsRes, rule: Rule{Fields: []string{"status.phase"}}, in: podJSON,
			want: `{"apiVersion": "v1", "kind": "Pod",
				"metadata": {"name": "web-1", "namespace": "prod", "uid": "u2", "resourceVersion": "42", "generation": 3},
				"status": {"phase": "Running"}}`},
		{name: "projection through lists", res: podsRes, rule: Rule{Fields: []string{"spec.containers[*].image", "spec.containers[*].env[*].name", "status.nope"}}, in: podJSON,
			want: `{"apiVersion": "v1", "kind": "Pod",
				"metadata": {"name": "web-1", "namespace": "prod", "uid": "u2", "resourceVersion": "42", "generation": 3},
				"spec": {"containers": [{"image": "web:1", "env": [{"name": "A"}, {"name": "B"}]}, {"image": "side:1"}]}}`},
		{name: "projection of a whole map and of labels", res: podsRes, rule: Rule{Fields: []string{"spec", "metadata.labels"}},
			in:   `{"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "y"}, "annotations": {"b": "c"}}, "spec": {"a": 1}, "status": {}}`,
			want: `{"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"a": 1}}`},
		{name: "redaction before projection", res: secretsRes, rule: Rule{Fields: []string{"data"}}, in: secretJSON,
			want: `{"apiVersion": "v1", "kind": "Secret",
				"metadata": {"name": "db", "namespace": "prod", "uid": "u1", "resourceVersion": "7"},
				"data": {"password": "", "user": ""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, tt.rule, tt.res)
			in := obj(t, tt.in)
			before := deepCopy(t, in)
			got := p.Shape(in)
			if want := obj(t, tt.want); !reflect.DeepEqual(got, want) {
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(want)
				t.Errorf("Shape:\n got %s\nwant %s", gb, wb)
			}
			if !reflect.DeepEqual(in, before) {
				t.Errorf("Shape modified its input")
			}
		})
	}
}

func TestShapeNoOpReturnsInput(t *testing.T) {
	p := mustCompile(t, Rule{}, cmRes)
	in := obj(t, `{"metadata": {"name": "a"}, "data": {"k": "v"}}`)
	if got := p.Shape(in); !sameMap(got, in) {
		t.Errorf("Shape copied an object it had nothing to do to")
	}
}

// sameMap reports whether a and b are the same map, not just equal.
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestRedacted(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		res  event.Resource
		want []string
	}{
		{name: "nothing", res: podsRes},
		{name: "secrets", res: secretsRes, want: []string{"data", "stringData"}},
		{name: "secrets opt-out", res: secretsRes, rule: Rule{RedactSecrets: new(false)}},
		{name: "secrets and sensitive", res: secretsRes, rule: Rule{Sensitive: []string{`metadata.annotations["x"]`}},
			want: []string{"data", "stringData", "metadata.annotations.x"}},
		{name: "sensitive", res: podsRes, rule: Rule{Sensitive: []string{"spec.token", `a["b.c"]`}},
			want: []string{"spec.token", `a["b.c"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustCompile(t, tt.rule, tt.res).Redacted(); !slices.Equal(got, tt.want) {
				t.Errorf("Redacted() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPathTreeWildcardMerge(t *testing.T) {
	// A wildcard and an explicit key under the same parent both apply to
	// the explicit key.
	tree := newPathTree(mustParsePaths([]string{"a[*].x", "a.b.y", "c", "c.d"}))
	b := tree.child("a").child("b")
	if b == nil || b.child("x") == nil || !b.child("x").leaf || b.child("y") == nil || !b.child("y").leaf {
		t.Errorf("a.b does not match both x and y")
	}
	if o := tree.child("a").child("other"); o == nil || o.child("y") != nil || o.child("x") == nil {
		t.Errorf("a.other must match x only")
	}
	if c := tree.child("c"); c == nil || !c.leaf || c.keys != nil {
		t.Errorf("c must be a leaf that swallows c.d")
	}
	if tree.child("zzz") != nil {
		t.Errorf("unknown key matched")
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

var gizmoGVR = schema.GroupVersionResource{Group: "schema.example.com", Version: "v1", Resource: "gizmos"}

// installGizmoCRD installs a namespaced CRD gizmos.schema.example.com with a structural
// schema (spec.size, an integer; spec.color, a string) and waits until it is served.
func installGizmoCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	installCRDWithSchema(t, dyn, gizmoGVR, "Gizmo", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"spec": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"size":  map[string]any{"type": "integer"},
					"color": map[string]any{"type": "string"},
				},
			},
		},
	})
	// The apiserver lists a CRD's OpenAPI v3 document a moment after serving it.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		data, err := kubeClient(t).RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctx)
		return err == nil && strings.Contains(string(data), `"apis/schema.example.com/v1"`), nil
	})
	if err != nil {
		t.Fatalf("CRD %s: no OpenAPI v3 document: %v", gizmoGVR, err)
	}
}

// schemaDynamic returns a dynamic client with both test CRDs installed.
func schemaDynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	installWidgetCRD(t, dyn)
	installGizmoCRD(t, dyn)
	return dyn
}

func TestRulesTypoExitsTwoNamingRuleFieldPositionAndTheField(t *testing.T) {
	schemaDynamic(t)
	vars := relayVars(testName(t))
	vars["RELAY_RULES_FILE"] = writeRules(t, `
resources:
  - resource: pods
    when: object.status.phse == "Running"
  - resource: deployments.apps
    when: |-
      eventType == "modified" &&
        object.spec.replica > 1
  - resource: gizmos.schema.example.com
    when: object.spec.size == "large"
  - resource: configmaps
    when: has(object.data) && object.data["k"] == "v"
`)
	requireExit(t, vars, 2, []string{
		`RELAY_RULES_FILE=`,
		`resources[0] (pods): when: 1:14: undefined field 'phse' on io.k8s.api.core.v1.PodStatus; did you mean 'phase'?`,
		`resources[1] (deployments.apps): when: 2:14: undefined field 'replica' on io.k8s.api.apps.v1.DeploymentSpec; did you mean 'replicas'?`,
		`resources[2] (gizmos.schema.example.com): when: 1:18: found no matching overload for '_==_' applied to '(int, string)'`,
	})
}

func TestRulesOverCoreAppsAndCRDsStartAndEventsNameTheirDataSchema(t *testing.T) {
	ctx := context.Background()
	dyn := schemaDynamic(t)
	name, cs := testNamespace(t)
	vars := relayVars(name)
	const base = "https://kubernetes.default.svc"
	vars["RELAY_DATASCHEMA_BASE_URL"] = base
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(`
defaults:
  namespaces: [%[1]s]
resources:
  - resource: configmaps
    when: has(object.data) && object.data["k"] == "v"
  - resource: deployments.apps
    when: object.?spec.?replicas.orValue(1) > 1 && object.metadata.namespace == "%[1]s"
  - resource: gizmos.schema.example.com
    when: object.spec.size > 2 && (oldObject == null || oldObject.spec.color != object.spec.color)
  - resource: widgets.example.com
    when: object.spec.anything.goes == "x"
    payload: objectAndOld
`, name))
	r := startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	// The CRD that keeps unknown fields is checked as dyn, and the relay says so.
	waitOutput(t, r, `checked without a schema`, `x-kubernetes-preserve-unknown-fields`)

	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "match"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gizmos := dyn.Resource(gizmoGVR).Namespace(name)
	for _, g := range []struct {
		name string
		size int64
	}{{"small", 1}, {"large", 5}} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "schema.example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": g.name}, "spec": map[string]any{"size": g.size, "color": "red"}}}
		if _, err := gizmos.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"anything": map[string]any{"goes": "x"}}}}
	if _, err := dyn.Resource(widgetGVR).Namespace(name).Create(ctx, widget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	js := jsClient(t)
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "the configmap, the large gizmo and the widget", func(msgs []received) bool {
		return countOf(msgs, name, "match", event.Added) == 1 && countOf(msgs, name, "large", event.Added) == 1 &&
			countOf(msgs, name, "w", event.Added) == 1
	})
	if n := countOf(msgs, name, "small", event.Added); n != 0 {
		t.Errorf("the small gizmo was published %d times, want 0 (when spec.size > 2)", n)
	}
	want := map[string]string{
		"match": base + "/openapi/v3/api/v1#/components/schemas/io.k8s.api.core.v1.ConfigMap",
		"large": base + "/openapi/v3/apis/schema.example.com/v1#/components/schemas/com.example.schema.v1.Gizmo",
		// A body that wraps the object with its old state is not described by the schema.
		"w": "",
	}
	for obj, uri := range want {
		m := lastOf(t, msgs, name, obj)
		if got := m.Header.Get(event.HeaderCEDataSchema); got != uri {
			t.Errorf("%s: ce-dataschema: got %q, want %q", obj, got, uri)
		}
		if uri != "" {
			checkComponentServed(t, uri)
		}
	}
	r.stop(t)
}

// checkComponentServed requires the apiserver to serve the document uri names (its path,
// whatever its host) with the component its fragment points to.
func checkComponentServed(t *testing.T, uri string) {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	data, err := kubeClient(t).RESTClient().Get().AbsPath(u.Path).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET %s: %v", u.Path, err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", u.Path, err)
	}
	component := strings.TrimPrefix(u.Fragment, "/components/schemas/")
	if _, ok := doc.Components.Schemas[component]; !ok {
		t.Errorf("%s: no component %q", u.Path, component)
	}
}

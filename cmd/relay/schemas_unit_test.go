package main

import (
	"context"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// fakeOpenAPI serves an OpenAPI v3 index of documents; err, when set, answers the index.
type fakeOpenAPI struct {
	docs map[string]fakeDocument
	err  error
}

func (f fakeOpenAPI) PathsWithContext(context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := make(map[string]openapi.GroupVersionWithContext)
	for path, d := range f.docs {
		out[path] = d
	}
	return out, nil
}

// fakeDocument is one document: its JSON, or the error reading it gives.
type fakeDocument struct {
	data []byte
	err  error
}

func (d fakeDocument) SchemaWithContext(context.Context, string) ([]byte, error) {
	return d.data, d.err
}
func (d fakeDocument) ServerRelativeURL() string { return "" }

var (
	testDeployments = relay.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment"}
	testPods        = relay.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod"}
)

func TestUnreadableSchemasFallBackToDynInsteadOfExitingTwo(t *testing.T) {
	apps, err := os.ReadFile("../../filter/testdata/openapi-apps-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{}, "", nil)
	path := writeRules(t, `
resources:
  - resource: deployments.apps
    when: object.spec.replica > 1
  - resource: pods
    when: object.status.phse == "Running"
`)
	setConfigEnv(t, map[string]string{"RELAY_RULES_FILE": path})
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	specs := cfg.Resources()
	resources := []relay.Resource{testDeployments, testPods}
	tests := []struct {
		name       string
		client     fakeOpenAPI
		wantTyped  []bool
		wantErrFor []string // resources whose typo is found
	}{
		{"index forbidden", fakeOpenAPI{err: forbidden}, []bool{false, false}, nil},
		{"core document forbidden", fakeOpenAPI{docs: map[string]fakeDocument{"apis/apps/v1": {data: apps}, "api/v1": {err: forbidden}}},
			[]bool{true, false}, []string{"deployments.apps"}},
		{"core document missing", fakeOpenAPI{docs: map[string]fakeDocument{"apis/apps/v1": {data: apps}, "api/v1": {err: apierrors.NewNotFound(schema.GroupResource{}, "")}}},
			[]bool{true, false}, []string{"deployments.apps"}},
		{"core document not JSON", fakeOpenAPI{docs: map[string]fakeDocument{"apis/apps/v1": {data: apps}, "api/v1": {data: []byte("<html>")}}},
			[]bool{true, false}, []string{"deployments.apps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			got := loadSchemas(ctx, tt.client, resources, []bool{true, true}, schemaDeadline)
			for i, s := range got {
				if s.typing.Typed() != tt.wantTyped[i] {
					t.Errorf("%s: typed %v, want %v (untyped because %q)", resources[i], s.typing.Typed(), tt.wantTyped[i], s.untyped)
				}
				if !tt.wantTyped[i] && s.untyped == "" {
					t.Errorf("%s: untyped without a reason", resources[i])
				}
			}
			err := checkRuleTypes(ctx, cfg, specs, resources, got)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if strings.Contains(msg, "pods") {
				t.Errorf("got %q, want no problem for pods, whose schema is unknown", msg)
			}
			for _, r := range tt.wantErrFor {
				if !strings.Contains(msg, r) {
					t.Errorf("got %q, want a problem for %s", msg, r)
				}
			}
			if len(tt.wantErrFor) == 0 && err != nil {
				t.Errorf("got %v, want no problems", err)
			}
		})
	}
}

// growingOpenAPI lists its documents only from the index's second reading on, as the
// apiserver does for a CRD established a moment before.
type growingOpenAPI struct {
	fakeOpenAPI
	reads *int
}

func (g growingOpenAPI) PathsWithContext(ctx context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	*g.reads++
	if *g.reads == 1 {
		return map[string]openapi.GroupVersionWithContext{}, nil
	}
	return g.fakeOpenAPI.PathsWithContext(ctx)
}

func TestSchemasOfAGroupVersionListedLateAreReadOnASecondLook(t *testing.T) {
	apps, err := os.ReadFile("../../filter/testdata/openapi-apps-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	client := growingOpenAPI{fakeOpenAPI{docs: map[string]fakeDocument{"apis/apps/v1": {data: apps}}}, &reads}
	got := loadSchemas(context.Background(), client, []relay.Resource{testDeployments}, []bool{true}, schemaDeadline)
	if !got[0].typing.Typed() || got[0].component != "io.k8s.api.apps.v1.Deployment" {
		t.Errorf("got component %q typed %v (%s), want io.k8s.api.apps.v1.Deployment typed", got[0].component, got[0].typing.Typed(), got[0].untyped)
	}
	if reads != 2 {
		t.Errorf("index read %d times, want 2", reads)
	}
}

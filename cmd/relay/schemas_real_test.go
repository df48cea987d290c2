package main

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"

	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// realSchemas reads the test apiserver's schemas of resources, failing the test when one is
// unknown or untyped.
func realSchemas(t *testing.T, resources ...relay.Resource) []resourceSchema {
	t.Helper()
	need := make([]bool, len(resources))
	for i := range need {
		need[i] = true
	}
	out := loadSchemas(context.Background(), openapi.NewClientWithContext(kubeClient(t).Discovery().RESTClient()), resources, need, schemaDeadline)
	for i, s := range out {
		if !s.typing.Typed() {
			t.Fatalf("%s: untyped: %s", resources[i], s.untyped)
		}
	}
	return out
}

func TestBuiltInSchemasTypeTheExpressionsUsersWrite(t *testing.T) {
	res := func(group, version, resource, kind string) relay.Resource {
		return relay.Resource{GroupVersionResource: schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, Kind: kind}
	}
	resources := []relay.Resource{
		res("", "v1", "pods", "Pod"),
		res("apps", "v1", "deployments", "Deployment"),
		res("batch", "v1", "jobs", "Job"),
		res("", "v1", "nodes", "Node"),
		res("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
		res("", "v1", "namespaces", "Namespace"),
		res("", "v1", "configmaps", "ConfigMap"),
	}
	schemas := realSchemas(t, resources...)
	tests := []struct {
		resource int
		expr     string
		wantErr  string // "" when the expression checks
	}{
		{0, `object.status.?conditions.orValue([]).exists(c, c.type == "Ready" && c.status == "True")`, ""},
		{0, `oldObject != null && oldObject.status.phase != object.status.phase`, ""},
		{0, `object.status.?containerStatuses.orValue([]).exists(s, s.?lastState.?terminated.?reason.orValue("") == "OOMKilled")`, ""},
		{0, `oldObject != null && object.status.?containerStatuses.orValue([]).exists(s, oldObject.status.?containerStatuses.orValue([]).exists(o, o.name == s.name && s.restartCount > o.restartCount))`, ""},
		{0, `object.spec.containers.exists(c, c.?resources.?limits["memory"].orValue("") == "1Gi")`, ""},
		{0, `object.metadata.namespace == "default" && has(object.metadata.deletionTimestamp)`, ""},
		{0, `object.spec.containers.exists(c, c.ports.exists(p, p.containerPort == "80"))`, "(int, string)"},
		{0, `object.status.phse == "Running"`, "undefined field 'phse'"},
		{1, `object.status.?conditions.orValue([]).exists(c, c.type == "Progressing" && c.reason == "NewReplicaSetAvailable") && object.status.?updatedReplicas.orValue(0) == object.spec.replicas`, ""},
		{1, `object.spec.strategy.?rollingUpdate.?maxSurge.orValue(1) == "25%"`, ""},
		{1, `object.spec.template.spec.containers[0].image.startsWith("nginx")`, ""},
		{2, `object.status.?conditions.orValue([]).exists(c, c.type in ["Complete", "Failed"] && c.status == "True")`, ""},
		{2, `object.status.?failed.orValue(0) > 0`, ""},
		{3, `object.status.conditions.exists(c, c.type == "Ready" && c.status != "True")`, ""},
		{3, `object.status.capacity["cpu"] == "4"`, ""},
		{4, `object.status.?phase.orValue("") == "Bound"`, ""},
		{4, `object.spec.resources.requests["storage"] == "1Gi"`, ""},
		{5, `object.status.?phase.orValue("") == "Terminating" || has(object.metadata.deletionTimestamp)`, ""},
		{6, `has(object.data) && object.data["k"] == "v" && object.metadata.labels.all(k, k.startsWith("app"))`, ""},
		{6, `object.binaryData["b"] == b"x"`, "(string, bytes)"},
	}
	for _, tt := range tests {
		t.Run(resources[tt.resource].Resource+": "+tt.expr, func(t *testing.T) {
			got := filter.CheckExpression(tt.expr, schemas[tt.resource].typing)
			switch {
			case tt.wantErr == "" && got != nil:
				t.Errorf("got %v, want no problems", got)
			case tt.wantErr != "" && (len(got) != 1 || !strings.Contains(got[0].Message, tt.wantErr)):
				t.Errorf("got %v, want one problem with %q", got, tt.wantErr)
			}
		})
	}
	// The kinds' components, as the apiserver names them.
	for i, want := range []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.apps.v1.Deployment", "io.k8s.api.batch.v1.Job"} {
		if schemas[i].component != want {
			t.Errorf("%s: component %q, want %q", resources[i], schemas[i].component, want)
		}
	}
}

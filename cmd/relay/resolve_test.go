package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// TestResolveResourcesRefusesAShortNameOfTwoResources resolves short names and singulars
// against the real apiserver: each resolves to its resource, except ev, the short name of
// both events and events.events.k8s.io, which kubectl's expander resolves to either from one
// start to the next (aggregated discovery's order is a map's). It is refused, naming both.
func TestResolveResourcesRefusesAShortNameOfTwoResources(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	specs := func(raw ...string) []ResourceSpec {
		var out []ResourceSpec
		for _, r := range raw {
			s, err := ParseResourceSpec(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}

	got, err := resolveResources(context.Background(), dc, specs("cm", "deploy", "event", "ev.events.k8s.io"))
	if err != nil {
		t.Fatalf("resolve cm, deploy, event, ev.events.k8s.io: %v", err)
	}
	want := []schema.GroupResource{{Resource: "configmaps"}, {Group: "apps", Resource: "deployments"}, {Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}
	if len(got) != len(want) {
		t.Fatalf("resolved %d resources %v, want %d %v", len(got), got, len(want), want)
	}
	for i, r := range got {
		if r.GroupResource() != want[i] {
			t.Errorf("resource %d resolved to %s, want %s", i, r.GroupResource(), want[i])
		}
	}

	_, err = resolveResources(context.Background(), dc, specs("cm", "ev"))
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("resolve cm, ev: %v, want one configuration problem", err)
	}
	p := ce.Problems[0]
	if p.Var != "RELAY_RESOURCES" || p.Value != "ev" || !strings.Contains(p.Reason, "more than one resource") ||
		!strings.Contains(p.Reason, "events") || !strings.Contains(p.Reason, "events.events.k8s.io") {
		t.Errorf("problem %+v, want RELAY_RESOURCES=ev named as a short name of events and events.events.k8s.io", p)
	}
}

package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

func TestDerivedEventWhoseProjectionFailsCarriesTheBodyAndIsLoggedOnce(t *testing.T) {
	cms := event.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	p, err := filter.Compile(filter.Rule{Derived: []filter.Derived{
		{Name: "ready", Condition: `eventType == "modified"`, Fields: []string{"data.value"}},
	}}, cms)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rules, ok := rulesOf(p, zerolog.New(&out)).(relay.DerivingRules)
	if !ok {
		t.Fatal("rules with derived events do not derive")
	}
	// JSON has no NaN: the projection cannot be encoded.
	obj := map[string]any{"metadata": map[string]any{"name": "a"}, "data": map[string]any{"value": math.NaN()}}
	for range 2 {
		d := rules.Derive(relay.Change{Type: event.Modified, Origin: event.Live, Object: obj}, nil)
		if len(d.Fired) != 1 || d.Fired[0].Projected || d.Fired[0].Body != nil {
			t.Fatalf("fired: got %+v, want ready, unprojected (the change's body)", d.Fired)
		}
	}
	if got := strings.Count(out.String(), "derived event projection failed"); got != 1 {
		t.Errorf("warnings: got %d, want 1\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `"derived":"ready"`) {
		t.Errorf("the warning does not name the derived event:\n%s", out.String())
	}
}

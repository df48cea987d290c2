package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
)

// derivedRulesBefore and derivedRulesAfter are a deployment's rules before and after a state
// condition, other, is added; phase-changed (a transition condition) makes the relay keep
// each object's previous state.
const (
	derivedRulesBefore = `
resources:
  - resource: configmaps
    namespaces: [%s]
    events: [added, deleted]
    derived:
      - name: phase-changed
        condition: 'oldObject != null && oldObject.?data.?phase.orValue("") != object.?data.?phase.orValue("")'
`
	derivedRulesAfter = derivedRulesBefore + `      - name: other
        condition: 'object.?data.?other.orValue("") == "yes"'
`
)

// TestStateConditionAddedToARunningDeploymentFiresOnlyOnRises: objects exist before a state
// condition is added to the rules, some for which it already holds. After the restart with
// the new rules, a change of such an object must not fire it (the object did not start to
// hold it); an object whose change is the rise (its previous state known) and a new object
// that holds it fire it once.
func TestStateConditionAddedToARunningDeploymentFiresOnlyOnRises(t *testing.T) {
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedRulesBefore, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	createConfigMap(t, cs, name, "holds", nil, map[string]string{"other": "yes"})
	createConfigMap(t, cs, name, "rises", nil, map[string]string{"other": "no"})
	waitFor(t, js, vars["RELAY_STREAM"], "the added events", func(m []received) bool {
		return countOf(m, name, "holds", event.Added) == 1 && countOf(m, name, "rises", event.Added) == 1
	})
	r.stop(t)

	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedRulesAfter, name))
	r = startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	setCMData(t, cs, name, "holds", map[string]string{"noise": "1"}) // holds still: nothing
	setCMData(t, cs, name, "holds", map[string]string{"noise": "2"})
	setCMData(t, cs, name, "rises", map[string]string{"other": "yes"}) // rises: fires
	createConfigMap(t, cs, name, "fresh", nil, map[string]string{"other": "yes"})
	fence := createConfigMap(t, cs, name, "fence", nil, nil)
	waitCheckpoint(t, js, vars["RELAY_CHECKPOINT_BUCKET"], configMapsKey(name, name), rvAtLeast(t, fence.ResourceVersion))
	msgs := readStream(context.Background(), t, js, vars["RELAY_STREAM"])
	for obj, want := range map[string]int{"holds": 0, "rises": 1, "fresh": 1} {
		if got := len(contract.DerivedOf(msgs, name+"/"+obj, "other")); got != want {
			t.Errorf("other events of %s: got %d, want %d\n%s", obj, got, want, describe(msgs))
		}
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// derivedModifiedRules publishes only the ConfigMaps' modified and deleted events (their
// added is filtered), with the state condition ready.
const derivedModifiedRules = `
resources:
  - resource: configmaps
    namespaces: [%s]
    events: [modified, deleted]
    derived:
      - name: ready
        condition: 'object.?data.?state.orValue("") == "ready"'
`

// derivedAllRules publishes every change of the ConfigMaps, with the state condition ready.
const derivedAllRules = `
resources:
  - resource: configmaps
    namespaces: [%s]
    derived:
      - name: ready
        condition: 'object.?data.?state.orValue("") == "ready"'
`

// TestDerivedEventOfAModificationSurvivesAKillWhenTheAddedWasFiltered: an object's added
// is filtered and fires nothing; its next change is published and fires a state condition,
// and the relay is killed between that change's own event and its derived event. The
// replay must publish the derived event: the index recorded the object when its added was
// filtered, so the replay knows the condition did not hold before it.
func TestDerivedEventOfAModificationSurvivesAKillWhenTheAddedWasFiltered(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedModifiedRules, name))
	// The replay publishes the modified's own event again, under its id: the default
	// duplicate window drops the copy (see docs/guarantees.md).
	delete(vars, "RELAY_DUPLICATE_WINDOW")
	proxy := startDropProxy(t, strings.TrimPrefix(env.NATS.URL(), "nats://"))
	vars["NATS_URL"] = proxy.url()
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	key := name + "/web"
	createConfigMap(t, cs, name, "web", nil, map[string]string{"state": "pending"})
	// The web's filtered added writes its index record before its modified below is
	// handled: one object's items go through the pipeline in order. The other's modified
	// only shows that the relay is relaying the namespace before the proxy is armed.
	createConfigMap(t, cs, name, "other", nil, nil)
	setCMData(t, cs, name, "other", map[string]string{"n": "1"})
	waitFor(t, js, vars["RELAY_STREAM"], "the other's modified", func(m []received) bool { return countOf(m, name, "other", event.Modified) == 1 })

	proxy.arm(derivedSubject(name, name, "web", event.Modified, "ready"))
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"})
	killWhenDropped(t, r, proxy, "the rise's derived event")
	before := readStream(ctx, t, js, vars["RELAY_STREAM"])
	if countOf(contract.Ordinary(before), name, "web", event.Modified) != 1 || len(contract.DerivedOf(before, key, "ready")) != 0 {
		t.Fatalf("before the restart: want the web's modified without its derived event\n%s", describe(before))
	}

	vars["NATS_URL"] = env.NATS.URL()
	r = startRelay(t, vars)
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "the replayed rise", func(m []received) bool {
		return len(contract.DerivedOf(m, key, "ready")) >= 1
	})
	if got := contract.DerivedOf(msgs, key, "ready"); len(got) != 1 || got[0].Meta.Origin != event.Live {
		t.Errorf("ready events: got %d (%s), want 1 live\n%s", len(got), describe(got), describe(msgs))
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

// TestDerivedStateOfARefusedEventIsRecordedAcrossRestart: NATS refuses an object's modified
// events for good (the relay's user may not publish them) while their derived events go
// out. The index must record the state condition the derived event went out for, so that a
// relay restarted before the object's next change does not take it for not held and
// publish the rise again under that change's id.
func TestDerivedStateOfARefusedEventIsRecordedAcrossRestart(t *testing.T) {
	name, cs := testNamespace(t)
	// The relay's user may publish anything but the web's modified events; admin reads.
	auth := testenv.NATSAuth{User: "relay", Password: "pw-" + rand.Text()}
	admin := testenv.NATSAuth{User: "admin", Password: "pw-" + rand.Text()}
	denied := event.Meta{Cluster: name, Version: "v1", Resource: "configmaps", Namespace: name, Name: "web",
		Type: event.Modified}.Subject("kube").String()
	auth.ServerConfig = fmt.Sprintf(`authorization {
  users: [
    { user: relay, password: %q, permissions: { publish: { deny: [%q] } } }
    { user: admin, password: %q }
  ]
}
`, auth.Password, denied, admin.Password)
	srv := startAuthNATS(t, auth)
	vars := derivedVars(t, name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedAllRules, name))
	for k, v := range authVars(auth) {
		vars[k] = v
	}
	vars["NATS_URL"] = srv.URL()
	js := authJSClient(t, srv.URL(), admin)
	r := startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	key := name + "/web"
	createConfigMap(t, cs, name, "web", nil, map[string]string{"state": "pending"})
	setCMData(t, cs, name, "web", map[string]string{"state": "ready"}) // rises: the event refused, ready published
	rise, err := cs.CoreV1().ConfigMaps(name).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoint(t, js, vars["RELAY_CHECKPOINT_BUCKET"], configMapsKey(name, name), rvAtLeast(t, rise.ResourceVersion))
	waitOutput(t, r, `"message":"change undeliverable, moving on"`)
	r.stop(t)

	r = startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	setCMData(t, cs, name, "web", map[string]string{"noise": "1"}) // still ready: refused again, nothing derived
	fence := createConfigMap(t, cs, name, "fence", nil, nil)
	waitCheckpoint(t, js, vars["RELAY_CHECKPOINT_BUCKET"], configMapsKey(name, name), rvAtLeast(t, fence.ResourceVersion))
	msgs := readStream(context.Background(), t, js, vars["RELAY_STREAM"])
	if got := contract.DerivedOf(msgs, key, "ready"); len(got) != 1 {
		t.Errorf("ready events: got %d, want 1 (the rise before the restart)\n%s", len(got), describe(msgs))
	}
	if got := countOf(contract.Ordinary(msgs), name, "web", event.Modified); got != 0 {
		t.Errorf("modified events of web in the stream: got %d, want 0 (refused)", got)
	}
	r.stop(t)
}

// derivedGoneRules publishes only the ConfigMaps' added events (their deletes are
// filtered), with a condition that holds for deletes: gone.
const derivedGoneRules = `
resources:
  - resource: configmaps
    namespaces: [%s]
    events: [added]
    derived:
      - name: gone
        condition: 'eventType == "deleted"'
`

// TestFilteredDeleteOfAnObjectTheIndexDoesNotHoldPublishesItsDerivedEvents: the index
// entry of an object is gone (purged, or written by a relay that did not record it), and
// the object's delete is filtered. Its derived events are derived with no state condition
// held before it, as for a published delete of such an object: gone is published, once.
func TestFilteredDeleteOfAnObjectTheIndexDoesNotHoldPublishesItsDerivedEvents(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := derivedVars(t, name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(derivedGoneRules, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	key := name + "/web"
	createConfigMap(t, cs, name, "web", nil, nil)
	waitFor(t, js, vars["RELAY_STREAM"], "the added event", func(m []received) bool { return countOf(m, name, "web", event.Added) == 1 })
	r.stop(t)

	removeIndexEntry(t, js, vars, name, key)
	r = startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	if err := cs.CoreV1().ConfigMaps(name).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "the delete's derived event", func(m []received) bool {
		return len(contract.DerivedOf(m, key, "gone")) >= 1
	})
	gone := contract.DerivedOf(msgs, key, "gone")
	if len(gone) != 1 || gone[0].Meta.Type != event.Deleted || gone[0].Meta.Origin != event.Live {
		t.Errorf("gone events: got %d (%s), want 1 of the live delete\n%s", len(gone), describe(gone), describe(msgs))
	}
	if got := countOf(contract.Ordinary(msgs), name, "web", event.Deleted); got != 0 {
		t.Errorf("deleted events of web: got %d, want 0 (filtered)", got)
	}
	checkDerived(t, msgs, "kube")
	r.stop(t)
}

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// TestRelistWhileRunningGivesChangesNoPreviousState relays ConfigMaps with the payload
// objectAndOld through a network partition: while the relay is cut off, a ConfigMap changes
// and the history expires (etcd compacted, the apiserver's watch cache restarted). When the
// partition heals the same relay process meets 410 and relists; the change it finds carries
// oldObject null, as documented, not the state the relay saw last (the states in between
// are gone).
func TestRelistWhileRunningGivesChangesNoPreviousState(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	proxy := startPartitionProxy(t, strings.TrimPrefix(env.Kube.ServerURL(), "https://"))
	vars := relayVars(name)
	vars["KUBECONFIG"] = kubeconfigVia(t, "https://"+proxy.addr())
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(`
defaults:
  namespaces: [%s]
resources:
  - resource: configmaps
    payload: objectAndOld
`, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)

	cms := cs.CoreV1().ConfigMaps(name)
	set := func(v string) {
		t.Helper()
		cm, err := cms.Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": v}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMap(t, cs, name, "settings", nil, map[string]string{"v": "1"})
	set("2")
	msgs := waitFor(t, js, stream, "the live change", func(m []received) bool { return countOf(m, name, "settings", event.Modified) == 1 })
	if got := field(lastOf(t, msgs, name, "settings").Body, "oldObject", "data", "v"); got != "1" {
		t.Fatalf("live change: got oldObject data.v %v, want 1", got)
	}

	proxy.partition()
	set("3")
	if _, err := env.Kube.ExpireHistory(ctx); err != nil {
		t.Fatalf("expire history: %v", err)
	}
	set("4")
	proxy.heal()
	msgs = waitFor(t, js, stream, "the relisted change", func(m []received) bool { return countOf(m, name, "settings", event.Modified) == 2 })
	select {
	case <-r.Done(): // the relay started once: an event of origin relist from it is an in-process relist
		t.Fatalf("relay exited: %v, want it to relist while running", r.Err())
	default:
	}
	relisted := lastOf(t, msgs, name, "settings")
	if relisted.Meta.Origin != event.Relist || field(relisted.Body, "object", "data", "v") != "4" {
		t.Fatalf("got %s with data.v %v, want the relist's change to 4", relisted.Subject, field(relisted.Body, "object", "data", "v"))
	}
	if old, ok := relisted.Body["oldObject"]; !ok || old != nil {
		t.Errorf("relisted change: got oldObject %v, want null", old)
	}
	r.stop(t)
}

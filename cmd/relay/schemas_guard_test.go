package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

func TestGuardedDefaultsOverKindsWithoutTheFieldStartAndPublishWithoutErrors(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := relayVars(name)
	// The guards docs/configuration.md recommends, inherited by configmaps (no status) and
	// pods; and a field only pods declare, guarded by the kind.
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(`
defaults:
  namespaces: [%s]
  when: |-
    object.?status.?phase.orValue("") != "Succeeded" &&
      (!has(object.status) || object.status.phase != "Failed") &&
      (object.kind != "Pod" || object.spec.nodeName != "nowhere")
resources:
  - resource: configmaps
  - resource: pods
`, name))
	r := startRelay(t, vars)
	waitOutput(t, r, `"watching"`, `undeclared for this kind only`)
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, jsClient(t), vars["RELAY_STREAM"], "the configmap", func(msgs []received) bool {
		return countOf(msgs, name, "guarded", event.Added) == 1
	})
	r.stop(t)
	for _, line := range strings.Split(r.Output(), "\n") {
		if strings.Contains(line, `"level":"error"`) {
			t.Errorf("the valid rules gave a problem line: %s", line)
		}
	}
	if out := r.Output(); !strings.Contains(out, `for configmaps: undefined field 'spec'`) {
		t.Errorf("no info line about the kind-guarded field for configmaps:\n%s", out)
	}
}

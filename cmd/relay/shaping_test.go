package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// lastOf returns the last message of object ns/name, failing the test when there is none.
func lastOf(t *testing.T, msgs []received, ns, name string) received {
	t.Helper()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Meta.Namespace == ns && msgs[i].Meta.Name == name {
			return msgs[i]
		}
	}
	t.Fatalf("no message of %s/%s in:\n%s", ns, name, describe(msgs))
	return received{}
}

// countOf counts the messages of object ns/name with type typ.
func countOf(msgs []received, ns, name string, typ event.Type) int {
	n := 0
	for _, m := range msgs {
		if m.Meta.Namespace == ns && m.Meta.Name == name && m.Meta.Type == typ {
			n++
		}
	}
	return n
}

// field reads a nested field of a decoded body.
func field(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// shapingRules is the rules file of TestShapingQuietUpdatesAndTransitions.
const shapingRules = `
defaults:
  namespaces: [%[1]s]
resources:
  - resource: configmaps
    fields: ["data.keep"]
    payload: objectAndPatch
  - resource: leases.coordination.k8s.io
    quietUpdates: true
    payload: objectAndOld
  - resource: pods
    when: 'eventType != "modified" || oldObject == null || oldObject.status.phase != object.status.phase'
  - resource: secrets
`

func TestShapingQuietUpdatesAndTransitions(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	createDefaultServiceAccount(t, cs, name)
	vars := relayVars(name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(shapingRules, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitOutput(t, r, `"watching"`)

	// Secrets are redacted by default: keys kept, values empty, the last-applied copy gone.
	_, err := cs.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"aHVudGVyMg=="}}`}},
		Data:       map[string][]byte{"password": []byte("hunter2")},
		StringData: nil,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Projection and the patch payload.
	cm := createConfigMap(t, cs, name, "settings", nil, map[string]string{"keep": "1", "drop": "x"})
	cm.Data["keep"] = "2"
	if _, err := cs.CoreV1().ConfigMaps(name).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Quiet updates: a renewal alone is not an event; a new holder is, with the old state.
	lease := createLease(t, cs, name, "leader", "a")
	renew(t, cs, lease, "")
	renew(t, cs, lease, "b")

	// A transition filter on a status field: a condition change alone is not published,
	// a phase change is.
	pod := createPod(t, cs, name, "worker")
	setPodStatus(t, cs, pod, corev1.PodPending, "Scheduled")
	setPodStatus(t, cs, pod, corev1.PodRunning, "Ready")

	msgs := waitFor(t, js, stream, "the last change of every object", func(m []received) bool {
		return countOf(m, name, "creds", event.Added) == 1 && countOf(m, name, "settings", event.Modified) == 1 &&
			countOf(m, name, "leader", event.Modified) == 1 && countOf(m, name, "worker", event.Modified) == 1
	})

	secret := lastOf(t, msgs, name, "creds")
	if got := field(secret.Body, "data", "password"); got != "" {
		t.Errorf("secret value published: data.password = %v, want \"\"", got)
	}
	if got := field(secret.Body, "metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"); got != nil {
		t.Errorf("secret's last-applied annotation published: %v", got)
	}
	if got := secret.Header.Get(event.HeaderRedacted); !strings.Contains(got, "data") {
		t.Errorf("got %s %q, want it to name data", event.HeaderRedacted, got)
	}

	settings := lastOf(t, msgs, name, "settings")
	if got := settings.Header.Get(event.HeaderPayload); got != string(event.PayloadObjectAndPatch) {
		t.Errorf("got payload %q, want %q", got, event.PayloadObjectAndPatch)
	}
	if got := field(settings.Body, "object", "data"); fmt.Sprint(got) != "map[keep:2]" {
		t.Errorf("got projected data %v, want only keep=2", got)
	}
	if got := field(settings.Body, "object", "metadata", "name"); got != "settings" {
		t.Errorf("projection dropped the identity: metadata.name = %v", got)
	}
	if got := field(settings.Body, "patch", "data"); fmt.Sprint(got) != "map[keep:2]" {
		t.Errorf("got patch data %v, want keep=2", got)
	}

	leader := lastOf(t, msgs, name, "leader")
	if got := field(leader.Body, "oldObject", "spec", "holderIdentity"); got != "a" {
		t.Errorf("got oldObject holder %v, want a", got)
	}
	if got := field(leader.Body, "object", "spec", "holderIdentity"); got != "b" {
		t.Errorf("got object holder %v, want b", got)
	}

	worker := lastOf(t, msgs, name, "worker")
	if got := field(worker.Body, "status", "phase"); got != string(corev1.PodRunning) {
		t.Errorf("got published phase %v, want Running (the condition-only change must not be published)", got)
	}
	// What the rules kept out is counted, by reason.
	metrics := scrape(t, healthAddr(t, r))
	for _, series := range []string{
		`kube_nats_relay_changes_filtered_total{reason="quiet",resource="leases.coordination.k8s.io"}`,
		`kube_nats_relay_changes_filtered_total{reason="when",resource="pods"}`,
	} {
		if v, ok := metricValue(metrics, series); !ok || v < 1 {
			t.Errorf("%s: got %v, want at least 1", series, v)
		}
	}

	// After a restart the filters compare with the state at the checkpoint, not with
	// nothing and not with the current state: a renewal and a condition change made while
	// stopped stay quiet, a phase transition made while stopped is published.
	mover := createPod(t, cs, name, "mover")
	waitFor(t, js, stream, "the second pod", func(m []received) bool { return countOf(m, name, "mover", event.Added) == 1 })
	r.stop(t)
	lease = renew(t, cs, lease, "")
	setPodStatus(t, cs, pod, corev1.PodRunning, "Restarted")
	setPodStatus(t, cs, mover, corev1.PodRunning, "Started")
	r = startRelay(t, vars)
	waitOutput(t, r, "previous states loaded for filters")
	renew(t, cs, lease, "c")
	setPodStatus(t, cs, pod, corev1.PodSucceeded, "Done")
	msgs = waitFor(t, js, stream, "changes after the restart", func(m []received) bool {
		return field(lastOf(t, m, name, "leader").Body, "object", "spec", "holderIdentity") == "c" &&
			field(lastOf(t, m, name, "worker").Body, "status", "phase") == string(corev1.PodSucceeded) &&
			countOf(m, name, "mover", event.Modified) >= 1
	})
	if n := countOf(msgs, name, "leader", event.Modified); n != 2 {
		t.Errorf("got %d lease modifications, want 2 (renewals are quiet):\n%s", n, describe(msgs))
	}
	if n := countOf(msgs, name, "worker", event.Modified); n != 2 {
		t.Errorf("got %d pod modifications, want 2 (phase changes only):\n%s", n, describe(msgs))
	}
	if got := field(lastOf(t, msgs, name, "mover").Body, "status", "phase"); got != string(corev1.PodRunning) {
		t.Errorf("got phase %v for the pod that started while the relay was stopped, want Running", got)
	}
	r.stop(t)
}

func TestSecretValuesPublishedOnlyOnOptIn(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	vars := relayVars(name)
	vars["RELAY_RULES_FILE"] = writeRules(t, fmt.Sprintf(`
resources:
  - resource: secrets
    namespaces: [%s]
    redactSecrets: false
`, name))
	r := startRelay(t, vars)
	js := jsClient(t)
	waitOutput(t, r, `"watching"`)
	if _, err := cs.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "opt-in"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "the secret", func(m []received) bool { return countOf(m, name, "opt-in", event.Added) == 1 })
	s := lastOf(t, msgs, name, "opt-in")
	if got := field(s.Body, "data", "k"); got != "dg==" { // base64 of "v"
		t.Errorf("got data.k %v, want the value (opted in)", got)
	}
	if got := s.Header.Get(event.HeaderRedacted); got != "" {
		t.Errorf("got %s %q, want none", event.HeaderRedacted, got)
	}
	r.stop(t)
}

func createDefaultServiceAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	// No controller manager runs in this test bed: create the account pods default to.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createLease(t *testing.T, cs kubernetes.Interface, ns, name, holder string) *coordinationv1.Lease {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	l, err := cs.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// renew renews the lease (a heartbeat), handing it to holder when holder is set.
func renew(t *testing.T, cs kubernetes.Interface, l *coordinationv1.Lease, holder string) *coordinationv1.Lease {
	t.Helper()
	cur, err := cs.CoordinationV1().Leases(l.Namespace).Get(context.Background(), l.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// MicroTime keeps microseconds: a later renewal always differs.
	now := metav1.NewMicroTime(time.Now().Add(time.Millisecond))
	cur.Spec.RenewTime = &now
	if holder != "" {
		cur.Spec.HolderIdentity = &holder
	}
	out, err := cs.CoordinationV1().Leases(l.Namespace).Update(context.Background(), cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func createPod(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	automount := false
	p, err := cs.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &automount,
			Containers:                   []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setPodStatus writes the pod's phase and one condition named reason (a status-only change).
func setPodStatus(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase, reason string) {
	t.Helper()
	cur, err := cs.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = phase
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reason,
		LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of pod %s: %v", p.Name, err)
	}
}

// TestDefaultBodiesAsRead covers resources whose rules leave bodies alone but for stripping
// (the default): the relay publishes the apiserver's JSON without decoding it, from the list
// and from the watch alike. The body must still lose managedFields and the last-applied
// annotation, keep every other field, and say its kind and apiVersion.
func TestDefaultBodiesAsRead(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	create := func(obj string) *corev1.ConfigMap {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: obj, Labels: map[string]string{"app": "as-read"}, Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"k":"v"}}`, "team": "a<b>&c"}},
			Data: map[string]string{"k": "v \"quoted\" \u00e9\n", "empty": ""},
		}, metav1.CreateOptions{FieldManager: "as-read-test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.ManagedFields) == 0 {
			t.Fatalf("%s: the apiserver recorded no managedFields; the test would prove nothing", obj)
		}
		return cm
	}
	listed := create("listed")
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	waitOutput(t, r, `"watching"`)
	watched := create("watched")

	js := jsClient(t)
	msgs := waitFor(t, js, vars["RELAY_STREAM"], "both objects", func(m []received) bool {
		return countOf(m, name, "listed", event.Added) == 1 && countOf(m, name, "watched", event.Added) == 1
	})
	for _, cm := range []*corev1.ConfigMap{listed, watched} {
		m := lastOf(t, msgs, name, cm.Name)
		checkMessage(t, m, "kube")
		if got := field(m.Body, "apiVersion"); got != "v1" {
			t.Errorf("%s: apiVersion %v, want v1", cm.Name, got)
		}
		want := map[string]any{"team": "a<b>&c"}
		if got := field(m.Body, "metadata", "annotations"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: annotations %v, want %v (last-applied removed, the rest kept)", cm.Name, got, want)
		}
		if got, want := fmt.Sprint(field(m.Body, "data")), fmt.Sprint(map[string]any{"k": cm.Data["k"], "empty": ""}); got != want {
			t.Errorf("%s: data %s, want %s", cm.Name, got, want)
		}
		if got := field(m.Body, "metadata", "labels", "app"); got != "as-read" {
			t.Errorf("%s: labels.app %v, want as-read", cm.Name, got)
		}
		if got := field(m.Body, "metadata", "creationTimestamp"); got != cm.CreationTimestamp.UTC().Format(time.RFC3339) {
			t.Errorf("%s: creationTimestamp %v, want %s", cm.Name, got, cm.CreationTimestamp.UTC().Format(time.RFC3339))
		}
	}
}

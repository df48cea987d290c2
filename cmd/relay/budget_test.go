package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
)

// largeValue is the size of each large object's one data value: with its metadata the object
// is near 900 KB, like a Helm release Secret, and its event still fits NATS's default 1 MiB
// max_payload.
const largeValue = 880_000

func TestSmallMemoryBudgetRelaysLargeObjectsCompletelyInOrder(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	const n = 4
	pad := strings.Repeat("x", largeValue)
	// Secrets are read decoded (their data may be redacted), ConfigMaps as read: both paths.
	for i := range n {
		if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0", "pad": pad}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("secret-%d", i)}, StringData: map[string]string{"v": "0", "pad": pad}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps,secrets"
	vars["RELAY_NAMESPACES"] = name
	// The smallest budget allowed, about one object: each list page holds one object (a
	// Secret's page, base64 data included, is larger than the whole budget), and each
	// ConfigMap change, with its mirror state, holds twice the budget and passes alone.
	// Nothing may wait forever.
	vars["RELAY_MEMORY_BUDGET"] = "1Mi"
	vars["RELAY_MIRROR_RESOURCES"] = "configmaps"
	vars["RELAY_MIRROR_BUCKET"] = name + "-mirror"
	r := startRelay(t, vars)
	waitOutput(t, r, `"message":"memory budget"`, `"budget_bytes":1048576`, `"from":"RELAY_MEMORY_BUDGET"`)

	js := jsClient(t)
	stream := vars["RELAY_STREAM"]
	waitMsgs(t, js, stream, 2*n)

	// Live changes, two per object, made while the relay watches.
	for v := 1; v <= 2; v++ {
		for i := range n {
			cm, err := cs.CoreV1().ConfigMaps(name).Get(ctx, fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["v"] = fmt.Sprint(v)
			if _, err := cs.CoreV1().ConfigMaps(name).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			s, err := cs.CoreV1().Secrets(name).Get(ctx, fmt.Sprintf("secret-%d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Data["v"] = []byte(fmt.Sprint(v))
			if _, err := cs.CoreV1().Secrets(name).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitMsgs(t, js, stream, 2*n*3)
	msgs := readStream(ctx, t, js, stream)
	// Every change is acknowledged: the budget is all given back.
	addr := healthAddr(t, r)
	if v, ok := metricValue(scrape(t, addr), "kube_nats_relay_memory_budget_bytes"); !ok || v != 1<<20 {
		t.Errorf("kube_nats_relay_memory_budget_bytes: got %v (present %v), want %d", v, ok, 1<<20)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		v, ok := metricValue(scrape(t, addr), "kube_nats_relay_memory_budget_used_bytes")
		return ok && v == 0, nil
	})
	if err != nil {
		t.Errorf("memory budget still held once every change was acknowledged:\n%s", scrape(t, addr))
	}
	r.stop(t)

	if len(msgs) != 2*n*3 {
		t.Errorf("got %d events, want %d:\n%s", len(msgs), 2*n*3, describe(msgs))
	}
	for key, evs := range byObject(msgs) {
		if got := types(evs); got != "added,modified,modified" {
			t.Errorf("%s: got %s, want added,modified,modified", key, got)
		}
		var last uint64
		for _, m := range evs {
			if m.Header.Get(event.HeaderBodyOmitted) != "" || m.Body == nil {
				t.Errorf("%s rv %s: published without its body (%q)", key, m.Meta.ResourceVersion, m.Header.Get(event.HeaderBodyOmitted))
			}
			rv, ok := contract.ParseRV(m.Meta.ResourceVersion)
			if !ok || rv <= last {
				t.Errorf("%s: resourceVersion %s after %d, want increasing", key, m.Meta.ResourceVersion, last)
			}
			last = rv
		}
	}
}

func TestInvalidMemoryBudgetExitsWithCode2NamingIt(t *testing.T) {
	for _, value := range []string{"lots", "512Ki", "2Ti"} {
		t.Run(value, func(t *testing.T) {
			vars := map[string]string{"KUBECONFIG": env.Kube.KubeconfigPath(), "NATS_URL": env.NATS.URL(),
				"RELAY_RESOURCES": "configmaps", "RELAY_MEMORY_BUDGET": value}
			requireExit(t, vars, 2, []string{`RELAY_MEMORY_BUDGET="` + value + `"`})
		})
	}
}

// waitMsgs waits until stream holds at least want messages, reading only its state: the
// messages themselves are large.
func waitMsgs(t *testing.T, js jetstream.JetStream, stream string, want uint64) {
	t.Helper()
	var have uint64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false, nil // not created yet
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false, nil
		}
		have = info.State.Msgs
		return have >= want, nil
	})
	if err != nil {
		t.Fatalf("stream %s holds %d messages, want %d: %v", stream, have, want, err)
	}
}

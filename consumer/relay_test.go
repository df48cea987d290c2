package consumer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

var widgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// installWidgetCRD installs the namespaced CRD widgets.example.com, keeping any field, and
// waits until it is served.
func installWidgetCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create CRD: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgetGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("CRD widgets.example.com never served: %v", err)
	}
}

// received is one message a durable consumer delivered, decoded.
type received struct {
	msg jetstream.Msg
	e   consumer.Event
}

// TestDecodeWhatTheRelayPublishes runs the relay and reads its events back the way a
// downstream service does: a durable consumer over two resource filters, Decode,
// DecodeObject into a typed object, a CRD's Go type and unstructured, and the CloudEvents SDK.
func TestDecodeWhatTheRelayPublishes(t *testing.T) {
	ctx := context.Background()
	name := relaytest.Name(t)
	cs, err := kubernetes.NewForConfig(bed.Env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(bed.Env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	installWidgetCRD(t, dyn)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vars := bed.Vars(name)
	vars["RELAY_RESOURCES"] = "configmaps,widgets.example.com"
	vars["RELAY_NAMESPACES"] = name
	r := bed.Start(t, vars)
	js := jsClient(t)
	r.WaitWatching(t, js, name, 2)

	// A ConfigMap created, updated and deleted; a Widget created.
	cms := cs.CoreV1().ConfigMaps(name)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings.v1"}, Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createdRV := cm.ResourceVersion
	cm.Data["greeting"] = "bye"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updatedRV := cm.ResourceVersion
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gear"},
		"spec":     map[string]any{"size": int64(3), "color": "blue"},
	}}
	if w, err = dyn.Resource(widgetGVR).Namespace(name).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cmFilter := consumer.ResourceFilter("kube", name, schema.GroupResource{Resource: "configmaps"})
	cmFilter.Namespace = name
	widgetFilter := consumer.ResourceFilter("kube", name, widgetGVR.GroupResource())
	widgetFilter.Namespace = name
	filters, err := consumer.Subjects(cmFilter, widgetFilter)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.Durable(ctx, js, vars["RELAY_STREAM"], "decode", filters)
	if err != nil {
		t.Fatalf("Durable: %v", err)
	}
	got := receive(t, cons, 4)
	r.Stop(t)

	byKey := map[string]received{}
	for _, g := range got {
		e := g.e
		byKey[e.Name+"/"+string(e.Type)] = g
		if e.Prefix != "kube" || e.Cluster != name || e.Namespace != name || e.Origin != event.Live || e.Sequence == 0 || e.Stored.IsZero() {
			t.Errorf("%s: got prefix %q cluster %q namespace %q origin %s sequence %d stored %v, want kube, %s, %s, live, a sequence and a time",
				g.msg.Subject(), e.Prefix, e.Cluster, e.Namespace, e.Origin, e.Sequence, e.Stored, name, name)
		}
		if e.BodyOmitted != "" || e.FinalStateUnknown {
			t.Errorf("%s: got body omitted %q, final state unknown %v, want neither", g.msg.Subject(), e.BodyOmitted, e.FinalStateUnknown)
		}
		checkCloudEvent(t, g.msg.Subject(), g.msg.Headers(), g.msg.Data(), e)
	}

	for _, c := range []struct {
		key, rv, greeting string
	}{
		{"settings.v1/added", createdRV, "hello"},
		{"settings.v1/modified", updatedRV, "bye"},
		{"settings.v1/deleted", "", "bye"},
	} {
		g, ok := byKey[c.key]
		if !ok {
			t.Errorf("no event %s", c.key)
			continue
		}
		obj, err := consumer.DecodeObject[*corev1.ConfigMap](g.e)
		if err != nil {
			t.Errorf("%s: DecodeObject[*corev1.ConfigMap]: %v", c.key, err)
			continue
		}
		if obj.Data["greeting"] != c.greeting || obj.ResourceVersion != g.e.ResourceVersion || string(obj.UID) != g.e.UID {
			t.Errorf("%s: got greeting %q rv %s uid %s, want %q and the headers' rv %s uid %s", c.key, obj.Data["greeting"], obj.ResourceVersion, obj.UID, c.greeting, g.e.ResourceVersion, g.e.UID)
		}
		if c.rv != "" && g.e.ResourceVersion != c.rv {
			t.Errorf("%s: got rv %s, want %s (what the API returned)", c.key, g.e.ResourceVersion, c.rv)
		}
		if len(obj.ManagedFields) != 0 {
			t.Errorf("%s: managedFields present, want them stripped", c.key)
		}
	}

	g, ok := byKey["gear/added"]
	if !ok {
		t.Fatal("no event gear/added")
	}
	if g.e.Kind != "Widget" || g.e.GroupVersionResource() != widgetGVR || g.e.UID != string(w.GetUID()) {
		t.Errorf("widget event: got kind %s resource %v uid %s, want Widget, %v, %s", g.e.Kind, g.e.GroupVersionResource(), g.e.UID, widgetGVR, w.GetUID())
	}
	typed, err := consumer.DecodeObject[*widget](g.e)
	if err != nil || typed.Spec.Size != 3 || typed.Spec.Color != "blue" || typed.Name != "gear" {
		t.Errorf("DecodeObject[*widget]: got %+v, %v, want gear size 3 blue", typed, err)
	}
	u, err := consumer.DecodeObject[*unstructured.Unstructured](g.e)
	if err != nil {
		t.Fatalf("DecodeObject[*unstructured.Unstructured]: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); size != 3 || u.GetResourceVersion() != g.e.ResourceVersion {
		t.Errorf("unstructured widget: got size %d rv %s, want 3 and %s", size, u.GetResourceVersion(), g.e.ResourceVersion)
	}
}

// receive fetches and acknowledges until n events arrived, failing the test after a minute.
func receive(t *testing.T, cons jetstream.Consumer, n int) []received {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got []received
	for len(got) < n && time.Now().Before(deadline) {
		batch, err := cons.Fetch(n-len(got), jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for msg := range batch.Messages() {
			e, err := consumer.Decode(msg)
			if err != nil {
				t.Fatalf("decode %s: %v", msg.Subject(), err)
			}
			if err := msg.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
			got = append(got, received{msg: msg, e: e})
		}
	}
	if len(got) != n {
		t.Fatalf("received %d events within a minute, want %d", len(got), n)
	}
	return got
}

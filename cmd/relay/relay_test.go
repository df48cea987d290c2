package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

func rvInt(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an integer", rv)
	}
	return n
}

// checkMessage verifies what every message must carry: subject, id and body agree with
// the headers, and managedFields are gone.
func checkMessage(t *testing.T, m received, prefix string) {
	t.Helper()
	wantSubject := m.Meta.Subject(prefix).String()
	if m.Subject != wantSubject {
		t.Errorf("message %d: subject %q, want %q", m.Seq, m.Subject, wantSubject)
	}
	if got, want := m.Header.Get(event.HeaderMsgID), m.Meta.ID(); got != want {
		t.Errorf("message %d: Nats-Msg-Id %q, want %q", m.Seq, got, want)
	}
	if m.Header.Get(event.HeaderContentType) != event.ContentTypeJSON {
		t.Errorf("message %d: Content-Type %q", m.Seq, m.Header.Get(event.HeaderContentType))
	}
	md, _ := m.Body["metadata"].(map[string]any)
	if md == nil {
		t.Fatalf("message %d: body has no metadata: %v", m.Seq, m.Body)
	}
	if _, ok := md["managedFields"]; ok {
		t.Errorf("message %d: body still has metadata.managedFields", m.Seq)
	}
	for field, want := range map[string]string{"name": m.Meta.Name, "uid": m.Meta.UID, "resourceVersion": m.Meta.ResourceVersion} {
		if got, _ := md[field].(string); got != want {
			t.Errorf("message %d: body metadata.%s %q, want %q (headers)", m.Seq, field, got, want)
		}
	}
	if got, _ := m.Body["kind"].(string); got != m.Meta.Kind {
		t.Errorf("message %d: body kind %q, want %q", m.Seq, got, m.Meta.Kind)
	}
}

func TestInitialSyncPublishesEveryObjectOnce(t *testing.T) {
	// The paged list; TestWatchListInitialSyncPublishesEveryObjectOnce streams it.
	out := initialSyncOnce(t, map[string]string{"RELAY_WATCH_LIST": "off"})
	requireLists(t, out, string(event.InitialSync), false)
}

// initialSyncOnce creates objects, runs the relay with extra vars set, and requires every
// object published once with origin initial-sync; it returns the relay's output.
func initialSyncOnce(t *testing.T, extra map[string]string) string {
	t.Helper()
	ctx := context.Background()
	name, cs := testNamespace(t)
	const n = 200
	uids := make(map[string]string, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"i": strconv.Itoa(i)}}
				got, err := cs.CoreV1().ConfigMaps(name).Create(ctx, cm, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				uids[got.Name] = string(got.UID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}

	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	for k, v := range extra {
		vars[k] = v
	}
	r := startRelay(t, vars)
	js := jsClient(t)
	// The checkpoint appears once the whole list is acked: then everything is in the stream.
	key := relay.CheckpointKey(relay.SourceConfig{Cluster: name, Resource: relay.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}, Namespace: name})
	waitCheckpoint(t, js, name, key, func(string) bool { return true })
	msgs := readStream(ctx, t, js, vars["RELAY_STREAM"])
	r.stop(t)
	output := r.Output()

	if len(msgs) != n {
		t.Fatalf("messages: got %d, want %d", len(msgs), n)
	}
	seen := make(map[string]bool)
	for _, m := range msgs {
		checkMessage(t, m, "kube")
		if m.Meta.Type != event.Added || m.Meta.Origin != event.InitialSync {
			t.Errorf("%s: type %s origin %s, want added initial-sync", m.Meta.Name, m.Meta.Type, m.Meta.Origin)
		}
		if m.Meta.Cluster != name || m.Meta.Namespace != name || m.Meta.Group != "" || m.Meta.Version != "v1" ||
			m.Meta.Resource != "configmaps" || m.Meta.Kind != "ConfigMap" {
			t.Errorf("%s: meta %+v", m.Meta.Name, m.Meta)
		}
		if uids[m.Meta.Name] != m.Meta.UID {
			t.Errorf("%s: uid %s, want %s", m.Meta.Name, m.Meta.UID, uids[m.Meta.Name])
		}
		data, _ := m.Body["data"].(map[string]any)
		if want := strings.TrimLeft(strings.TrimPrefix(m.Meta.Name, "cm-"), "0"); data["i"] != want && !(want == "" && data["i"] == "0") {
			t.Errorf("%s: body data %v", m.Meta.Name, data)
		}
		if seen[m.Meta.Name] {
			t.Errorf("%s published twice", m.Meta.Name)
		}
		seen[m.Meta.Name] = true
	}
	if len(seen) != n {
		t.Errorf("distinct objects: got %d, want %d", len(seen), n)
	}
	return output
}

var widgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// installWidgetCRD installs a namespaced CRD widgets.example.com and waits until it is served.
func installWidgetCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	installCRD(t, dyn, widgetGVR, "Widget")
}

// installCRD installs a namespaced CRD serving gvr with objects of kind, with a schema that
// keeps any field, and waits until the resource is served.
func installCRD(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, kind string) {
	t.Helper()
	installCRDWithSchema(t, dyn, gvr, kind, map[string]any{
		"type":                                 "object",
		"x-kubernetes-preserve-unknown-fields": true,
	})
}

// installCRDWithSchema installs a namespaced CRD serving gvr with objects of kind and the
// given openAPIV3Schema, and waits until the resource is served.
func installCRDWithSchema(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, kind string, openAPIV3Schema map[string]any) {
	t.Helper()
	ctx := context.Background()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{
			"group": gvr.Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural": gvr.Resource, "singular": strings.ToLower(kind),
				"kind": kind, "listKind": kind + "List",
			},
			"versions": []any{map[string]any{
				"name": gvr.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": openAPIV3Schema},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create CRD: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("CRD %s never served: %v", gvr, err)
	}
}

func TestLiveChangesOfCoreCRDAndClusterScopedResources(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	cs := kubeClient(t)
	dyn, err := dynamic.NewForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	installWidgetCRD(t, dyn)
	createNamespace(t, cs, name)

	label := map[string]string{"relay-test": name}
	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "configmaps,widgets.example.com,clusterroles.rbac.authorization.k8s.io"
	vars["RELAY_LABEL_SELECTOR"] = "relay-test=" + name
	r := startRelay(t, vars)
	js := jsClient(t)
	// Each source writes its first checkpoint after its (empty) initial list: then it watches.
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		widgetGVR,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	} {
		waitCheckpoint(t, js, name, checkpointKey(name, gvr, vars["RELAY_LABEL_SELECTOR"]), func(string) bool { return true })
	}

	// want holds, per object, the resourceVersions the API returned for create, update, update.
	want := map[string][]string{}
	cms := cs.CoreV1().ConfigMaps(name)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: label}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want[name+"/settings"] = append(want[name+"/settings"], cm.ResourceVersion)
	for i := 1; i <= 2; i++ {
		cm.Data["v"] = strconv.Itoa(i)
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name+"/settings"] = append(want[name+"/settings"], cm.ResourceVersion)
	}
	if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	widgets := dyn.Resource(widgetGVR).Namespace(name)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gear.v2", "labels": map[string]any{"relay-test": name}},
		"spec":     map[string]any{"size": int64(0)},
	}}
	if w, err = widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want[name+"/gear.v2"] = append(want[name+"/gear.v2"], w.GetResourceVersion())
	for i := 1; i <= 2; i++ {
		_ = unstructured.SetNestedField(w.Object, int64(i), "spec", "size")
		if w, err = widgets.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name+"/gear.v2"] = append(want[name+"/gear.v2"], w.GetResourceVersion())
	}
	if err := widgets.Delete(ctx, "gear.v2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	crs := cs.RbacV1().ClusterRoles()
	crName := name + ":reader"
	cr, err := crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName, Labels: label}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want[crName] = append(want[crName], cr.ResourceVersion)
	for _, verb := range []string{"get", "list"} {
		cr.Rules = append(cr.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{verb}})
		if cr, err = crs.Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[crName] = append(want[crName], cr.ResourceVersion)
	}
	if err := crs.Delete(ctx, crName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	msgs := waitFor(t, js, vars["RELAY_STREAM"], "12 events", func(m []received) bool { return len(m) >= 12 })
	r.stop(t)
	msgs = readStream(ctx, t, js, vars["RELAY_STREAM"])
	if len(msgs) != 12 {
		t.Fatalf("messages: got %d, want 12:\n%s", len(msgs), describe(msgs))
	}
	objects := byObject(msgs)
	expect := map[string]struct{ kind, group, resource, ns string }{
		name + "/settings": {"ConfigMap", "", "configmaps", name},
		name + "/gear.v2":  {"Widget", "example.com", "widgets", name},
		crName:             {"ClusterRole", "rbac.authorization.k8s.io", "clusterroles", ""},
	}
	for key, e := range expect {
		got := objects[key]
		if types(got) != "added,modified,modified,deleted" {
			t.Errorf("%s: types %s, want added,modified,modified,deleted", key, types(got))
			continue
		}
		for i, m := range got {
			checkMessage(t, m, "kube")
			if m.Meta.Kind != e.kind || m.Meta.Group != e.group || m.Meta.Resource != e.resource || m.Meta.Namespace != e.ns {
				t.Errorf("%s #%d: meta %+v, want kind %s group %q resource %s namespace %q", key, i, m.Meta, e.kind, e.group, e.resource, e.ns)
			}
			if m.Meta.Origin != event.Live {
				t.Errorf("%s #%d: origin %s, want live", key, i, m.Meta.Origin)
			}
			if i < 3 && m.Meta.ResourceVersion != want[key][i] {
				t.Errorf("%s #%d: rv %s, want %s", key, i, m.Meta.ResourceVersion, want[key][i])
			}
			if i > 0 && rvInt(t, m.Meta.ResourceVersion) <= rvInt(t, got[i-1].Meta.ResourceVersion) {
				t.Errorf("%s #%d: rv %s not after %s", key, i, m.Meta.ResourceVersion, got[i-1].Meta.ResourceVersion)
			}
		}
	}
	// The subjects spell the cluster-scoped namespace and the dotted names as documented.
	if s := objects[crName][0].Subject; s != fmt.Sprintf("kube.%s.rbac~2Eauthorization~2Ek8s~2Eio.v1.clusterroles._.%s.added", name, crName) {
		t.Errorf("cluster-scoped subject: %s", s)
	}
	if s := objects[name+"/gear.v2"][3].Subject; s != fmt.Sprintf("kube.%s.example~2Ecom.v1.widgets.%s.gear~2Ev2.deleted", name, name) {
		t.Errorf("CRD subject: %s", s)
	}
	if spec, _ := objects[name+"/gear.v2"][2].Body["spec"].(map[string]any); spec["size"] != float64(2) {
		t.Errorf("widget body after second update: spec %v, want size 2", spec)
	}
}

// checkpointKey is the key the relay checkpoints a cluster-wide source of gvr under.
func checkpointKey(cluster string, gvr schema.GroupVersionResource, labelSelector string) string {
	return relay.CheckpointKey(relay.SourceConfig{
		Cluster:       cluster,
		Resource:      relay.Resource{GroupVersionResource: gvr},
		LabelSelector: labelSelector,
	})
}

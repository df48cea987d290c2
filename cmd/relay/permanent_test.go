package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// waitOutput waits until the relay has printed want.
func waitOutput(t *testing.T, r *relayProc, want ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		out := r.Output()
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("relay output never showed %q:\n%s", want, r.Output())
	}
}

func TestForbiddenResourceStopsAloneAndNamesThePermission(t *testing.T) {
	ctx := context.Background()
	name, cs := testNamespace(t)
	// The relay's identity may list and watch ConfigMaps in the namespace, not Secrets.
	saCfg, err := env.Kube.ServiceAccountConfig(ctx, name, "relay")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "relay"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}}}
	if _, err := cs.RbacV1().Roles(name).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "relay"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "relay"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "relay", Namespace: name}}}
	if _, err := cs.RbacV1().RoleBindings(name).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	vars := relayVars(name)
	vars["KUBECONFIG"] = relaytest.WriteKubeconfig(t, saCfg)
	vars["RELAY_RESOURCES"] = "secrets,configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	// The streaming list (RELAY_WATCH_LIST=auto, the default) reads with the watch verb: the
	// server refuses that first, and the relay names it.
	waitOutput(t, r, "resource failing", `cannot watch resource \"secrets\"`)

	// ConfigMaps keep flowing.
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "still-flowing"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	js := jsClient(t)
	waitFor(t, js, vars["RELAY_STREAM"], "the ConfigMap's event", func(m []received) bool {
		for _, x := range m {
			if x.Meta.Name == "still-flowing" && x.Meta.Type == event.Added {
				return true
			}
		}
		return false
	})
	r.stop(t)
	if strings.Contains(r.Output(), `"resource":"configmaps.v1","error"`) {
		t.Errorf("configmaps reported an error:\n%s", r.Output())
	}
}

func TestDeletedCRDStopsItsResourceOnly(t *testing.T) {
	ctx := context.Background()
	name := testName(t)
	cs := kubeClient(t)
	dyn, err := dynamic.NewForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// A CRD of this test's own, so deleting it disturbs no other test.
	group := name + ".example.com"
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gadgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	installCRD(t, dyn, gadgets, "Gadget")
	createNamespace(t, cs, name)

	vars := relayVars(name)
	vars["RELAY_RESOURCES"] = "gadgets." + group + ",configmaps"
	vars["RELAY_NAMESPACES"] = name
	r := startRelay(t, vars)
	waitOutput(t, r, `"resource":"gadgets.v1.`+group+`","namespace"`, `"resource":"configmaps.v1","namespace"`, `"message":"watching"`)

	if err := dyn.Resource(crdGVR).Delete(ctx, "gadgets."+group, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, r, "resource failing", "gadgets.v1."+group)

	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-crd-delete"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	js := jsClient(t)
	waitFor(t, js, vars["RELAY_STREAM"], "the ConfigMap's event", func(m []received) bool {
		for _, x := range m {
			if x.Meta.Name == "after-crd-delete" {
				return true
			}
		}
		return false
	})
	r.stop(t)
}

package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// step is one change the demo makes; do returns the events it must cause.
type step struct {
	title string
	// note explains something a reader might wonder about; printed under the title.
	note string
	do   func(ctx context.Context) ([]want, error)
}

// want is an event a step must cause. rv is the resourceVersion the API server returned for
// the change; empty for a delete, whose resourceVersion the client never sees, and for the
// changes controllers make. When prefix is set, name is the start of a generated name (the
// ReplicaSet's and Pods' of a Deployment). phase, when set, is the Pod phase the event's body
// must show. derived, when set, names the derived event (of the library's rules) wanted
// instead of an ordinary one; typ is then ignored.
type want struct {
	typ       event.Type
	resource  string
	namespace string
	name      string
	rv        string
	prefix    bool
	phase     corev1.PodPhase
	derived   string
}

// podStarts returns the events of n new Pods of Deployment web: created Pending by the
// ReplicaSet controller, then reported Running and Ready by kwok once the scheduler bound
// them (derived event ready).
func podStarts(n int) []want {
	var ws []want
	for range n {
		ws = append(ws,
			want{typ: event.Added, resource: "pods", namespace: namespace, name: "web-", prefix: true, phase: corev1.PodPending},
			want{typ: event.Modified, resource: "pods", namespace: namespace, name: "web-", prefix: true, phase: corev1.PodRunning},
			want{derived: "ready", resource: "pods", namespace: namespace, name: "web-", prefix: true, phase: corev1.PodRunning})
	}
	return ws
}

// rolloutComplete is the derived event of Deployment web once every replica is updated and
// available.
var rolloutComplete = want{derived: "rollout-complete", resource: "deployments", namespace: namespace, name: "web"}

// newStory returns the demo's changes: a namespace; a Deployment created and scaled, which the
// controllers, the scheduler and kwok turn into a ReplicaSet and Running Pods; a ConfigMap
// created and updated; and the namespace deleted with everything in it.
func newStory(cs kubernetes.Interface) []step {
	deployments := cs.AppsV1().Deployments(namespace)
	configMaps := cs.CoreV1().ConfigMaps(namespace)
	labels := map[string]string{"app": "web"}
	replicas := func(n int32) *int32 { return &n }
	return []step{
		{
			title: "create namespace " + namespace,
			note:  "the root CA publisher adds ConfigMap kube-root-ca.crt to every new namespace",
			do: func(ctx context.Context) ([]want, error) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
				ns, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return []want{{typ: event.Added, resource: "namespaces", name: namespace, rv: ns.ResourceVersion}}, nil
			},
		},
		{
			title: "create Deployment web (1 replica, image nginx)",
			note: "the deployment controller creates a ReplicaSet, the ReplicaSet controller a Pod (Pending);\n" +
				"   the scheduler binds it to the node and kwok, playing kubelet, reports it Running and Ready.\n" +
				"   Status updates of the Deployment and the ReplicaSet follow; derived events say what they mean:\n" +
				"   the Pod ready, the Deployment's rollout complete",
			do: func(ctx context.Context) ([]want, error) {
				d := &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
					Spec: appsv1.DeploymentSpec{
						Replicas: replicas(1),
						Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: labels},
							Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
						},
					},
				}
				d, err := deployments.Create(ctx, d, metav1.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return append([]want{
					{typ: event.Added, resource: "deployments", namespace: namespace, name: "web", rv: d.ResourceVersion},
					{typ: event.Added, resource: "replicasets", namespace: namespace, name: "web-", prefix: true},
					rolloutComplete,
				}, podStarts(1)...), nil
			},
		},
		{
			title: "scale Deployment web to 3 replicas (update spec.replicas)",
			note:  "two more Pods, each Pending, then Running and ready; the rollout completes again",
			do: func(ctx context.Context) ([]want, error) {
				d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				d.Spec.Replicas = replicas(3)
				if d, err = deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
					return nil, err
				}
				return append([]want{
					{typ: event.Modified, resource: "deployments", namespace: namespace, name: "web", rv: d.ResourceVersion},
					rolloutComplete,
				}, podStarts(2)...), nil
			},
		},
		{
			title: "create ConfigMap settings",
			do: func(ctx context.Context) ([]want, error) {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "settings"},
					Data:       map[string]string{"greeting": "hello"},
				}
				cm, err := configMaps.Create(ctx, cm, metav1.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return []want{{typ: event.Added, resource: "configmaps", namespace: namespace, name: "settings", rv: cm.ResourceVersion}}, nil
			},
		},
		{
			title: "update ConfigMap settings (greeting: hello -> hello, world)",
			do: func(ctx context.Context) ([]want, error) {
				cm, err := configMaps.Get(ctx, "settings", metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				cm.Data["greeting"] = "hello, world"
				if cm, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					return nil, err
				}
				return []want{{typ: event.Modified, resource: "configmaps", namespace: namespace, name: "settings", rv: cm.ResourceVersion}}, nil
			},
		},
		{
			title: "delete namespace " + namespace,
			note: "the namespace turns Terminating (derived event terminating); the namespace controller deletes everything in it,\n" +
				"   kwok removes the Pods once they are marked for deletion, and the namespace goes last",
			do: func(ctx context.Context) ([]want, error) {
				// Every object of a relayed resource in the namespace must come back DELETED.
				wants, err := namespaceContents(ctx, cs)
				if err != nil {
					return nil, err
				}
				if err := cs.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil {
					return nil, err
				}
				return append(wants,
					want{derived: "terminating", resource: "namespaces", name: namespace},
					want{typ: event.Deleted, resource: "namespaces", name: namespace}), nil
			},
		},
	}
}

// namespaceContents returns a DELETED want for every Deployment, ReplicaSet, Pod and
// ConfigMap in the demo namespace.
func namespaceContents(ctx context.Context, cs kubernetes.Interface) ([]want, error) {
	var ws []want
	add := func(resource string, names []string) {
		for _, n := range names {
			ws = append(ws, want{typ: event.Deleted, resource: resource, namespace: namespace, name: n})
		}
	}
	opts := metav1.ListOptions{}
	ds, err := cs.AppsV1().Deployments(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	rss, err := cs.AppsV1().ReplicaSets(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list replicasets: %w", err)
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list configmaps: %w", err)
	}
	add("deployments", names(ds.Items, func(o appsv1.Deployment) string { return o.Name }))
	add("replicasets", names(rss.Items, func(o appsv1.ReplicaSet) string { return o.Name }))
	add("pods", names(pods.Items, func(o corev1.Pod) string { return o.Name }))
	add("configmaps", names(cms.Items, func(o corev1.ConfigMap) string { return o.Name }))
	return ws, nil
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}

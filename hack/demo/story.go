package main

import (
	"context"

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
// the change; empty for a delete, whose resourceVersion the client never sees.
type want struct {
	typ       event.Type
	resource  string
	namespace string
	name      string
	rv        string
}

// newStory returns the demo's changes: a namespace, a Deployment created, scaled and deleted,
// a ConfigMap created, updated and deleted.
func newStory(cs kubernetes.Interface) []step {
	deployments := cs.AppsV1().Deployments(namespace)
	configMaps := cs.CoreV1().ConfigMaps(namespace)
	labels := map[string]string{"app": "web"}
	replicas := func(n int32) *int32 { return &n }
	return []step{
		{
			title: "create namespace " + namespace,
			do: func(ctx context.Context) ([]want, error) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
				ns, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return []want{{event.Added, "namespaces", "", namespace, ns.ResourceVersion}}, nil
			},
		},
		{
			title: "create Deployment web (1 replica, image nginx)",
			note: "no nodes, scheduler or controllers run here: no ReplicaSet or Pod appears,\n" +
				"   only the Deployment object itself changes",
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
				return []want{{event.Added, "deployments", namespace, "web", d.ResourceVersion}}, nil
			},
		},
		{
			title: "scale Deployment web to 3 replicas (update spec.replicas)",
			do: func(ctx context.Context) ([]want, error) {
				d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				d.Spec.Replicas = replicas(3)
				if d, err = deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
					return nil, err
				}
				return []want{{event.Modified, "deployments", namespace, "web", d.ResourceVersion}}, nil
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
				return []want{{event.Added, "configmaps", namespace, "settings", cm.ResourceVersion}}, nil
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
				return []want{{event.Modified, "configmaps", namespace, "settings", cm.ResourceVersion}}, nil
			},
		},
		{
			title: "delete ConfigMap settings",
			do: func(ctx context.Context) ([]want, error) {
				if err := configMaps.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
					return nil, err
				}
				return []want{{event.Deleted, "configmaps", namespace, "settings", ""}}, nil
			},
		},
		{
			title: "delete Deployment web",
			do: func(ctx context.Context) ([]want, error) {
				if err := deployments.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
					return nil, err
				}
				return []want{{event.Deleted, "deployments", namespace, "web", ""}}, nil
			},
		},
	}
}

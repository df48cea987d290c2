package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// webLabels select the Pods of the Deployment newDeployment makes.
var webLabels = map[string]string{"app": "web"}

// newDeployment returns Deployment web with replicas Pods. The image is never pulled: kwok
// only pretends to run containers.
func newDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: webLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: webLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

// scale sets Deployment web's replicas.
func scale(t *testing.T, cs kubernetes.Interface, namespace string, replicas int32) {
	t.Helper()
	// The deployment controller writes the Deployment's status meanwhile, which moves the
	// resourceVersion the scale carries: read again and retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.AppsV1().Deployments(namespace).GetScale(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = cs.AppsV1().Deployments(namespace).UpdateScale(context.Background(), "web", s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scale to %d: %v", replicas, err)
	}
}

// waitRunningPods waits until exactly n Pods of Deployment web exist in namespace, every one
// Running on a node and none being deleted, and returns them.
func waitRunningPods(t *testing.T, cs kubernetes.Interface, namespace string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var last string
	sel := labels.SelectorFromSet(webLabels).String()
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, eventTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = list.Items
		var states []string
		running := 0
		for _, p := range pods {
			states = append(states, fmt.Sprintf("%s=%s@%s", p.Name, p.Status.Phase, p.Spec.NodeName))
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				running++
			}
		}
		last = strings.Join(states, ", ")
		return running == n && len(pods) == n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d Running Pods in %s: %v (last: %s)", n, namespace, err, last)
	}
	return pods
}

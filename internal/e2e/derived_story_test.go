package e2e

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The objects of the derived-event library test, each made to cross one of the library's
// conditions by the controller that owns it in a real cluster.

// nowhere is a node selector no node matches: a Pod with it stays Pending, unscheduled.
var nowhere = map[string]string{"derived-library-test": "nowhere"}

// libraryTaint keeps every Pod off the test's own node, so that the Deployments' Pods land on
// the test bed's nodes and nothing runs on the node the test turns NotReady.
var libraryTaint = corev1.Taint{Key: "derived-library-test", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// podTemplate returns a Pod template labelled app=name with one container; selector, when
// set, keeps it off every node.
func podTemplate(name string, selector map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "app", Image: "busybox"}},
			NodeSelector:  selector,
			RestartPolicy: restart,
		},
	}
}

// libraryDeployment returns Deployment name with replicas Pods; selector as in podTemplate.
// progressDeadline is the seconds the controller allows a rollout to progress.
func libraryDeployment(name string, replicas, progressDeadline int32, selector map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			ProgressDeadlineSeconds: &progressDeadline,
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:                podTemplate(name, selector, corev1.RestartPolicyAlways),
		},
	}
}

// libraryJob returns Job name. With a deadline and the nowhere selector its Pod never
// starts and the job controller fails it (DeadlineExceeded); without, kwok runs its Pod to
// completion and the job controller completes it.
func libraryJob(name string, deadline *int64, selector map[string]string) *batchv1.Job {
	backoff := int32(0)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: deadline,
			Template:              podTemplate(name, selector, corev1.RestartPolicyNever),
		},
	}
}

// libraryVolume returns a StorageClass without a provisioner, a PersistentVolume of that
// class and a claim in namespace that only that volume satisfies: the controller-manager's
// persistent volume controller binds them.
func libraryVolume(name, namespace string) (*storagev1.StorageClass, *corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	immediate := storagev1.VolumeBindingImmediate
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &immediate,
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   modes,
			StorageClassName:              name,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: &name,
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
		},
	}
	return sc, pv, pvc
}

// libraryNode returns Node name, tainted so that no Pod is scheduled on it. kwok does not
// manage it (no kwok annotation): the test plays its kubelet and writes its status.
func libraryNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("10"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"kubernetes.io/hostname": name},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{libraryTaint}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// updatePodStatus writes Pod name's status through the status subresource after change has
// edited it, retrying on conflicts as the kubelet's status manager does.
func updatePodStatus(t *testing.T, cs kubernetes.Interface, namespace, name string, change func(*corev1.PodStatus)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := cs.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&p.Status)
		_, err = cs.CoreV1().Pods(namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update status of pod %s: %v", name, err)
	}
}

// setPodReady sets the Pod's Ready and ContainersReady conditions, as the kubelet's status
// manager does when a container stops or starts being ready.
func setPodReady(s *corev1.PodStatus, ready bool, reason string) {
	status := corev1.ConditionFalse
	if ready {
		status, reason = corev1.ConditionTrue, ""
	}
	now := metav1.Now()
	for i, c := range s.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			s.Conditions[i].Status, s.Conditions[i].Reason, s.Conditions[i].LastTransitionTime = status, reason, now
		}
	}
	for i := range s.ContainerStatuses {
		s.ContainerStatuses[i].Ready = ready
	}
}

// waitAPI polls cond until it holds or eventTimeout passes; what names it in the failure.
func waitAPI(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, eventTimeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

// updateNodeStatus writes Node name's status through the status subresource after change has
// edited it, as the kubelet's node status updater does.
func updateNodeStatus(t *testing.T, cs kubernetes.Interface, name string, change func(*corev1.NodeStatus)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&n.Status)
		_, err = cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update status of node %s: %v", name, err)
	}
}

// nodeReadyStatus returns the Ready condition a kubelet reports: True with reason
// KubeletReady, or False with reason KubeletNotReady.
func nodeReadyStatus(ready bool) corev1.NodeCondition {
	now := metav1.Now()
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
	if !ready {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready"
	}
	return c
}

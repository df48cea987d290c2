package relaytest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// Kube returns an admin client of env's control plane.
func Kube(t testing.TB, env *testenv.Env) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// JetStream connects to env's nats-server; the connection closes at cleanup.
func JetStream(t testing.TB, env *testenv.Env) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(env.NATS.URL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// CreateNamespace creates namespace name; it is not deleted afterwards.
func CreateNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

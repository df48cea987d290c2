package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

const (
	// nodeHeartbeat is how often kwok refreshes each simulated node's status here, instead of
	// the 10 minutes of its shipped stage, so that Node heartbeats show up within a test.
	nodeHeartbeat = 3 * time.Second
	// nodes is the number of simulated nodes: more than one, so that a Deployment's Pods
	// spread and every node heartbeats on its own.
	nodes = 2
	// eventTimeout bounds the wait for the events of a change the controllers make: Pods
	// start within seconds; a busy 2-core machine may need many times that.
	eventTimeout = 2 * time.Minute
	// pollInterval paces the checks of the API's state.
	pollInterval = 200 * time.Millisecond
)

var (
	env      *testenv.Env
	relayBin string
)

// TestMain starts the full cluster and a nats-server for the package, and builds the relay.
func TestMain(m *testing.M) {
	opts := testenv.Options{
		Cluster:        true,
		ClusterOptions: testenv.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat},
		NATS:           true,
	}
	relaytest.Main(m, opts, &env, &relayBin)
}

// clientset returns an admin client of the test bed.
func clientset(t *testing.T) kubernetes.Interface { return relaytest.Kube(t, env) }

// createNamespace creates namespace name. The test deletes it itself when that is what it
// tests; otherwise it goes at cleanup.
func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	relaytest.CreateNamespace(t, cs, name)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// logClusterOnFailure prints the ends of the controllers' and kwok's logs if the test fails.
func logClusterOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.Cluster.LogTails())
		}
	})
}

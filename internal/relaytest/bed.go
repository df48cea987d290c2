package relaytest

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// Bed is the test bed a test package shares: testenv's control plane and nats-server, and the
// relay binary built for them. A package declares one and runs it from TestMain:
//
//	var bed relaytest.Bed
//
//	func TestMain(m *testing.M) { bed.Main(m, testenv.Options{Kube: true, NATS: true}) }
type Bed struct {
	Env *testenv.Env
	// Bin is the relay binary.
	Bin string
}

// Main builds the relay and runs the package's tests on the test bed (see the function Main).
func (b *Bed) Main(m *testing.M, opts testenv.Options) { Main(m, opts, &b.Env, &b.Bin) }

// Vars is Vars for the bed's control plane and nats-server.
func (b *Bed) Vars(name string) map[string]string { return Vars(b.Env, name) }

// Start is Start with the bed's relay binary.
func (b *Bed) Start(t testing.TB, vars map[string]string) *Process { return Start(t, b.Bin, vars) }

// Kube is Kube for the bed's control plane.
func (b *Bed) Kube(t testing.TB) *kubernetes.Clientset { return Kube(t, b.Env) }

// JetStream is JetStream for the bed's nats-server.
func (b *Bed) JetStream(t testing.TB) jetstream.JetStream { return JetStream(t, b.Env) }

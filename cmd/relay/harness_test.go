package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/internal/contract"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

var (
	env      *testenv.Env
	relayBin string
)

func TestMain(m *testing.M) {
	// The relay runs as a real process: signals, exit codes and kill -9 are part of what the
	// tests check.
	relaytest.Main(m, testenv.Options{Kube: true, NATS: true}, &env, &relayBin)
}

// relayProc is a relay process started by a test.
type relayProc struct {
	*relaytest.Process
}

// testName is a short lower-case name unique to the test, usable as cluster, namespace and
// bucket name.
func testName(t *testing.T) string { return relaytest.Name(t) }

// relayVars returns a configuration for a relay publishing to the test bed's NATS with a
// stream, bucket and cluster name of the test's own.
func relayVars(name string) map[string]string { return relaytest.Vars(env, name) }

func startRelay(t *testing.T, vars map[string]string) *relayProc {
	t.Helper()
	return &relayProc{relaytest.Start(t, relayBin, vars)}
}

// requireExit runs the relay with vars and args until it exits, and requires exit status code
// and every one of want in its output.
func requireExit(t *testing.T, vars map[string]string, code int, want []string, args ...string) {
	t.Helper()
	got, out := relaytest.Run(t, relayBin, vars, args...)
	if got != code {
		t.Fatalf("exit: got status %d, want exit status %d\n%s", got, code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// shutdownTimeout is the clean exit the relay promises after SIGTERM.
const shutdownTimeout = 10 * time.Second

// stop sends SIGTERM and requires a clean exit within the promised 10 seconds.
func (r *relayProc) stop(t *testing.T) {
	t.Helper()
	start := time.Now()
	r.Stop(t)
	if took := time.Since(start); took > shutdownTimeout {
		t.Errorf("shutdown took %s, want at most %s", took, shutdownTimeout)
	}
}

// received is one message read back from the stream.
type received = contract.Message

func jsClient(t *testing.T) jetstream.JetStream { return relaytest.JetStream(t, env) }

// readStream returns every message in the stream, in order; nil when it does not exist yet.
func readStream(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string) []received {
	t.Helper()
	msgs, err := contract.ReadStream(ctx, js, stream)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// waitFor polls the stream until cond holds for its messages, and returns them.
func waitFor(t *testing.T, js jetstream.JetStream, stream string, what string, cond func([]received) bool) []received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var msgs []received
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		msgs = readStream(ctx, t, js, stream)
		return cond(msgs), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; have %d messages:\n%s", what, err, len(msgs), describe(msgs))
	}
	return msgs
}

func describe(msgs []received) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "  %d %s rv=%s origin=%s\n", m.Seq, m.Subject, m.Meta.ResourceVersion, m.Meta.Origin)
	}
	return b.String()
}

// checkpoint returns the checkpoint stored under key, "" when there is none.
func checkpointRV(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket, key string) string {
	t.Helper()
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		// A replicated bucket answers direct gets only once its replicas are up, and not
		// while electing a leader: ask again.
		return ""
	}
	if err != nil {
		t.Fatalf("checkpoint %s: %v", key, err)
	}
	rv, err := checkpoint.ResourceVersion(e.Value())
	if err != nil {
		t.Fatalf("checkpoint %s: %v", key, err)
	}
	return rv
}

func waitCheckpoint(t *testing.T, js jetstream.JetStream, bucket, key string, cond func(rv string) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rv string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		rv = checkpointRV(ctx, t, js, bucket, key)
		return rv != "" && cond(rv), nil
	})
	if err != nil {
		t.Fatalf("waiting for checkpoint %s: %v (last %q)", key, err, rv)
	}
	return rv
}

func kubeClient(t *testing.T) *kubernetes.Clientset { return relaytest.Kube(t, env) }

// testNamespace creates a namespace named after the test (testName) and returns its name and an
// admin client.
func testNamespace(t *testing.T) (string, *kubernetes.Clientset) {
	t.Helper()
	name := testName(t)
	cs := kubeClient(t)
	createNamespace(t, cs, name)
	return name, cs
}

// testConfigMaps is testNamespace for a test that changes nothing but ConfigMaps: it returns
// the namespace's name and its ConfigMaps.
func testConfigMaps(t *testing.T) (string, corev1client.ConfigMapInterface) {
	t.Helper()
	name, cs := testNamespace(t)
	return name, cs.CoreV1().ConfigMaps(name)
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	relaytest.CreateNamespace(t, cs, name)
}

// byObject groups messages by namespace/name, in stream order.
func byObject(msgs []received) map[string][]received { return contract.ByObject(msgs) }

func types(msgs []received) string {
	ts := make([]string, len(msgs))
	for i, m := range msgs {
		ts[i] = string(m.Meta.Type)
	}
	return strings.Join(ts, ",")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/event"
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
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testName is a short lower-case name unique to the test, usable as cluster, namespace and
// bucket name.
func testName(t *testing.T) string {
	t.Helper()
	n := strings.ToLower(t.Name())
	n = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, n)
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("%s%d", n, time.Now().UnixNano()%100000)
}

// relayVars returns a configuration for a relay publishing to the test bed's NATS with a
// stream, bucket and cluster name of the test's own.
func relayVars(name string) map[string]string {
	return map[string]string{
		"KUBECONFIG":                env.Kube.KubeconfigPath(),
		"NATS_URL":                  env.NATS.URL(),
		"RELAY_CLUSTER":             name,
		"RELAY_STREAM":              strings.ToUpper(name),
		"RELAY_CHECKPOINT_BUCKET":   name,
		"RELAY_INDEX_BUCKET":        name + "-index",
		"RELAY_CHECKPOINT_INTERVAL": "200ms",
		"RELAY_LOG_LEVEL":           "debug",
		"RELAY_HTTP_ADDR":           "127.0.0.1:0",
	}
}

func startRelay(t *testing.T, vars map[string]string) *relayProc {
	t.Helper()
	cmd := exec.Command(relayBin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start relay: %v", err)
	}
	r := &relayProc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("relay output:\n%s", out.String())
		}
	})
	return r
}

// stop sends SIGTERM and requires a clean exit within the promised 10 seconds.
func (r *relayProc) stop(t *testing.T) {
	t.Helper()
	start := time.Now()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("relay still running 15s after SIGTERM")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown took %s, want at most 10s", took)
	}
	if r.err != nil {
		t.Fatalf("relay exit after SIGTERM: %v, want exit 0\n%s", r.err, r.out.String())
	}
}

// received is one message read back from the stream.
type received struct {
	seq     uint64
	subject string
	header  nats.Header
	meta    event.Meta
	body    map[string]any
}

func jsClient(t *testing.T) jetstream.JetStream { return relaytest.JetStream(t, env) }

// readStream returns every message in the stream, in order; nil when it does not exist yet.
func readStream(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string) []received {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []received
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		r := received{seq: seq, subject: m.Subject, header: m.Header}
		if r.meta, err = event.MetaFromHeader(m.Header); err != nil {
			t.Fatalf("message %d on %s: bad headers: %v", seq, m.Subject, err)
		}
		if len(m.Data) > 0 {
			if err := json.Unmarshal(m.Data, &r.body); err != nil {
				t.Fatalf("message %d: body is not JSON: %v", seq, err)
			}
		}
		out = append(out, r)
	}
	return out
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
		fmt.Fprintf(&b, "  %d %s rv=%s origin=%s\n", m.seq, m.subject, m.meta.ResourceVersion, m.meta.Origin)
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

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	relaytest.CreateNamespace(t, cs, name)
}

// byObject groups messages by namespace/name, in stream order.
func byObject(msgs []received) map[string][]received {
	out := make(map[string][]received)
	for _, m := range msgs {
		k := m.meta.Name
		if m.meta.Namespace != "" {
			k = m.meta.Namespace + "/" + k
		}
		out[k] = append(out[k], m)
	}
	return out
}

func types(msgs []received) string {
	ts := make([]string, len(msgs))
	for i, m := range msgs {
		ts[i] = string(m.meta.Type)
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

// Package relaytest runs the relay binary in integration tests (cmd/relay, consumer, examples,
// e2e, charts): it builds the binary once per test package, starts it as a real process
// (internal/child) with a configuration of the test's own, and waits until it watches, or runs
// it to its exit. Record also consumes what that relay publishes, for tests that assert on the
// events; Report hands the problems of internal/contract's checks to a test.
//
// The binary and the test bed live in one directory that testenv removes when the package's
// tests end; every process started here is stopped when its test ends, failed or not.
package relaytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child/childtest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

const (
	// relayPackage is what Build compiles.
	relayPackage = "github.com/kube-nats-relay/kube-nats-relay/cmd/relay"
	// stopTimeout is what the relay promises for a clean exit after SIGTERM (10s), with room
	// for a busy machine.
	stopTimeout = 15 * time.Second
	// readyTimeout bounds the relay's start up to its first checkpoints: discovery, stream,
	// buckets and initial lists, on a busy 2-core machine.
	readyTimeout = 2 * time.Minute
	// pollInterval paces the readiness checks.
	pollInterval = 100 * time.Millisecond
)

// Main is a test package's TestMain for tests that run the relay: it builds the relay into
// the test bed's directory, stores the binary's path in *bin, and hands over to testenv.Main.
func Main(m *testing.M, opts testenv.Options, env **testenv.Env, bin *string) {
	dir, err := os.MkdirTemp("", "relaytest-")
	if err == nil {
		*bin, err = Build(filepath.Join(dir, "bin"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaytest: %v\n", err)
		os.Exit(1)
	}
	opts.Dir = dir // testenv removes it, binary included
	testenv.Main(m, opts, env)
}

// Build compiles the relay into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "relay")
	if out, err := exec.Command("go", "build", "-o", bin, relayPackage).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build relay: %w\n%s", err, out)
	}
	return bin, nil
}

// Name returns a short lower-case name unique to the test, usable as cluster, namespace,
// stream and bucket name.
func Name(t testing.TB) string {
	t.Helper()
	n := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(t.Name()))
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("%s%d", n, time.Now().UnixNano()%100000)
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on right now, for a server
// the test starts (an embedded nats-server) or for a refused connection.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// Vars returns a relay configuration against env's control plane and nats-server, with
// cluster, stream and buckets named after name (the stream upper-cased). Tests add
// RELAY_RESOURCES and whatever else they need.
func Vars(env *testenv.Env, name string) map[string]string {
	return map[string]string{
		"KUBECONFIG":                env.Kube.KubeconfigPath(),
		"NATS_URL":                  env.NATS.URL(),
		"RELAY_CLUSTER":             name,
		"RELAY_STREAM":              strings.ToUpper(name),
		"RELAY_CHECKPOINT_BUCKET":   name,
		"RELAY_INDEX_BUCKET":        name + "-index",
		"RELAY_CHECKPOINT_INTERVAL": "200ms",
		"RELAY_LOG_LEVEL":           "debug",
		// Probes on a free port: relays of packages tested in parallel must not share one.
		"RELAY_HTTP_ADDR": "127.0.0.1:0",
	}
}

// Process is a relay started by Start: a child.Process whose Stop takes the test instead of a
// grace period.
type Process struct {
	*child.Process
}

// Start runs the relay binary with vars as its whole environment (plus PATH and HOME). The
// process is killed when the test ends if it is still running; its output is logged if the
// test failed.
func Start(t testing.TB, bin string, vars map[string]string) *Process {
	t.Helper()
	return &Process{Process: childtest.Start(t, child.Spec{Name: "relay", Path: bin, Env: childtest.Env(vars)})}
}

// Run runs the relay binary with args and vars as its whole environment (plus PATH and HOME)
// until it exits, for a run that is to end by itself (a configuration error, a subcommand), and
// returns its exit code and output. A relay still running after readyTimeout fails the test.
func Run(t testing.TB, bin string, vars map[string]string, args ...string) (code int, output string) {
	t.Helper()
	p := childtest.Start(t, child.Spec{Name: "relay", Path: bin, Args: args, Env: childtest.Env(vars)})
	select {
	case <-p.Done():
	case <-time.After(readyTimeout):
		t.Fatalf("relay %s still running after %s\n%s", strings.Join(args, " "), readyTimeout, p.Output())
	}
	return p.State().ExitCode(), p.Output()
}

// Stop sends SIGTERM and requires a clean exit within stopTimeout.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	if err := p.Process.Stop(stopTimeout); err != nil {
		t.Fatalf("relay stop: %v, want exit 0 after SIGTERM", err)
	}
}

// Connect connects with opts to the nats-server the relay embeds, at url, retrying until it
// accepts clients. It fails the test if the relay exits first or nothing accepts within
// readyTimeout. The connection is closed when the test ends.
func (p *Process) Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	var nc *nats.Conn
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, readyTimeout, true, func(context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("relay exited (%v) before its embedded server accepted clients", p.Err())
		}
		nc, last = nats.Connect(url, opts...)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("connect to the embedded server at %s: %v (last: %v)\n%s", url, err, last, p.Output())
	}
	t.Cleanup(nc.Close)
	return nc
}

// WaitWatching waits until the relay has written sources checkpoints in bucket: every source
// has listed and watches, so each later change becomes an event. It fails the test if the
// relay exits first.
func (p *Process) WaitWatching(t testing.TB, js jetstream.JetStream, bucket string, sources int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("relay exited: %v", p.Err())
		}
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			last = err
			return false, nil
		}
		keys, err := kv.Keys(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
			last = err
			return false, nil
		}
		// A source with derived state conditions also records them under "_derived." and
		// its key (see docs/guarantees.md): that is not a checkpoint.
		keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "_derived.") })
		last = fmt.Errorf("%d checkpoints so far", len(keys))
		return len(keys) >= sources, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d checkpoints in bucket %s: %v (last: %v)\n%s", sources, bucket, err, last, p.Output())
	}
}

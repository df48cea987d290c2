// Command demo runs the relay's main job end to end on this machine, with real parts only: a
// cluster from internal/testenv (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, and kwok playing kubelet for one simulated node), the relay binary
// (.bin/relay) with its embedded nats-server, an ordered JetStream consumer, and a short story
// of changes made with client-go that the controllers follow up on: a Deployment's ReplicaSet
// and Pods (Pending, then Running), and the deletion of everything in a deleted namespace.
// Every change the story expects must come back as exactly one valid event, in order;
// otherwise the demo exits non-zero. `make demo` builds the relay and runs it; -full also prints every
// message (subject, headers, body).
//
// Everything it starts is stopped on exit, Ctrl-C included; its state directory is removed.
// Only the relay's log file is kept, for reading afterwards.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// What the relay is told, and so what the consumer expects.
const (
	cluster   = "demo"
	prefix    = "kube"
	resources = "deployments.apps,replicasets.apps,pods,configmaps,namespaces"
	// sources is the number of checkpoints the relay writes once it has listed every
	// resource: one per resource, since no namespaces are configured.
	sources = 5
	// namespace holds the story's objects.
	namespace = "demo"
)

// The relay's default names for the cluster, which the demo also passes explicitly.
var (
	stream = event.DefaultStream(cluster)
	bucket = event.DefaultCheckpointBucket(cluster)
)

const (
	// relayReadyTimeout bounds the relay's start: discovery, the embedded nats-server, the
	// stream, the bucket and five initial lists take a few seconds on an idle machine; a
	// busy 2-core one may need many times that.
	relayReadyTimeout = 90 * time.Second
	// eventTimeout bounds the wait for one step's events. The relay publishes within
	// milliseconds and the controllers, the scheduler and kwok act within seconds; this only
	// fails a relay that lost a change (or a cluster that is stuck).
	eventTimeout = 60 * time.Second
	// stepPause separates the steps so that the output reads as a story.
	stepPause = time.Second
	// relayStopTimeout is how long the relay may take to exit after SIGTERM: what `docker stop`
	// allows (the relay's own shutdown timeout is 8s).
	relayStopTimeout = 10 * time.Second
	// pollInterval paces the readiness checks.
	pollInterval = 200 * time.Millisecond
	// eventBuffer holds events between the consumer and the printer; the story and the
	// controllers make about a hundred.
	eventBuffer = 1024
	// logTailLines is how much of the relay's log a failure shows.
	logTailLines = 40
)

func main() {
	full := flag.Bool("full", false, "also print every message in full: subject, headers and body")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *full)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo: FAILED: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, full bool) (err error) {
	binDir, err := testenv.BinDir()
	if err != nil {
		return err
	}
	relayBin := filepath.Join(binDir, "relay")
	if _, err := os.Stat(relayBin); err != nil {
		return fmt.Errorf("relay binary: %w (make demo builds it)", err)
	}
	dir, err := os.MkdirTemp("", "kube-nats-relay-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logFile, err := os.CreateTemp("", "kube-nats-relay-demo-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()

	say("starting etcd and kube-apiserver (state in %s)", dir)
	start := time.Now()
	cp, err := testenv.StartControlPlane(ctx, filepath.Join(dir, "kube"), testenv.ControlPlaneOptions{})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer cp.Stop() // a no-op when stopped below
	say("control plane ready at %s (%s)", cp.ServerURL(), since(start))
	say("starting kube-controller-manager, kube-scheduler and kwok with one simulated node")
	start = time.Now()
	cl, err := testenv.StartCluster(ctx, cp, filepath.Join(dir, "cluster"), testenv.ClusterOptions{Nodes: 1})
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer cl.Stop() // a no-op when stopped below
	say("node %s Ready and schedulable (%s)", strings.Join(cl.Nodes(), ", "), since(start))

	rules, ruled, err := writeRules(dir)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	natsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	say("starting the relay with its embedded nats-server on %s; relay log: %s", natsAddr, logFile.Name())
	say("rules: the derived events of %s for %s", libraryFile, strings.Join(ruled, ", "))
	start = time.Now()
	r, err := startRelay(relayBin, logFile, []string{
		"KUBECONFIG=" + cp.KubeconfigPath(),
		"RELAY_NATS_LISTEN=" + natsAddr,
		"RELAY_NATS_DATA_DIR=" + filepath.Join(dir, "nats"),
		"RELAY_RESOURCES=" + resources,
		"RELAY_RULES_FILE=" + rules,
		"RELAY_CLUSTER=" + cluster,
		"RELAY_SUBJECT_PREFIX=" + prefix,
		"RELAY_STREAM=" + stream,
		"RELAY_CHECKPOINT_BUCKET=" + bucket,
		"RELAY_LOG_FORMAT=console",
		"RELAY_HTTP_ADDR=127.0.0.1:0", // probes on a free port: the demo needs none
		// The log goes to a file: no terminal colours (zerolog's console writer honours it).
		"NO_COLOR=1",
		// Skip the initial sync, so that only the demo's own changes become events.
		"RELAY_INITIAL_SYNC=skip",
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			printTail(r, logFile.Name())
		}
	}()
	defer func() { _ = r.Stop(relayStopTimeout) }() // a no-op when the relay was stopped below

	nc, js, err := waitRelayReady(ctx, r, "nats://"+natsAddr)
	if err != nil {
		return err
	}
	defer nc.Close()
	say("relay ready: stream %s over %s, all %d resources listed, initial sync skipped (%s)",
		stream, event.StreamSubject(prefix, cluster), sources, since(start))

	consumeCtx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	events, cc, err := consume(consumeCtx, js)
	if err != nil {
		return err
	}
	defer cc.Stop()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	say("consuming stream %s with an ordered consumer, one line per event as it arrives:", stream)
	c := newChecker(events, r.Done(), full)
	c.printHeader()
	if err := tell(ctx, c, newStory(cs)); err != nil {
		if r.Exited() {
			return fmt.Errorf("%w (%s)", err, r.State())
		}
		return err
	}
	if err := c.err(); err != nil {
		return err
	}

	cc.Stop()
	nc.Close()
	fmt.Println()
	say("stopping the relay with SIGTERM")
	start = time.Now()
	if err := r.Stop(relayStopTimeout); err != nil {
		return err
	}
	say("relay exited 0 after %s", since(start))
	cl.Stop()
	cp.Stop()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	say("cluster stopped, %s removed; relay log kept: %s", dir, logFile.Name())
	fmt.Println()
	c.summary()
	return nil
}

// tell runs the steps, each followed by the wait for its events, and a pause.
func tell(ctx context.Context, c *checker, steps []step) error {
	for i, s := range steps {
		fmt.Printf("\nstep %d/%d: %s\n", i+1, len(steps), s.title)
		if s.note != "" {
			fmt.Printf("  (%s)\n", s.note)
		}
		wants, err := s.do(ctx)
		if err != nil {
			return fmt.Errorf("step %q: %w", s.title, err)
		}
		if err := c.expect(ctx, wants, eventTimeout); err != nil {
			return fmt.Errorf("step %q: %w", s.title, err)
		}
		if err := c.watch(ctx, stepPause); err != nil {
			return err
		}
	}
	return nil
}

// startRelay runs bin with env added to this process's environment minus NATS_URL,
// KUBECONFIG and every RELAY_ variable, so that nothing from the caller's shell changes the
// demo. Its output goes to log.
func startRelay(bin string, log *os.File, env []string) (*child.Process, error) {
	var vars []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "NATS_URL" && name != "KUBECONFIG" && !strings.HasPrefix(name, "RELAY_") {
			vars = append(vars, kv)
		}
	}
	// Its own process group keeps a terminal's Ctrl-C away from it: the demo stops it with
	// SIGTERM and checks the exit.
	return child.Start(child.Spec{Name: "relay", Path: bin, Env: append(vars, env...), Log: log, OwnGroup: true})
}

// waitRelayReady connects to the embedded nats-server once it is up and waits until the
// stream exists and every resource has a checkpoint: the initial lists are done, so every
// later change reaches the relay's watches.
func waitRelayReady(ctx context.Context, r *child.Process, url string) (*nats.Conn, jetstream.JetStream, error) {
	ctx, cancel := context.WithTimeout(ctx, relayReadyTimeout)
	defer cancel()
	var nc *nats.Conn
	var js jetstream.JetStream
	err := poll(ctx, r, "nats-server at "+url, func() error {
		var err error
		nc, err = nats.Connect(url, nats.Name("kube-nats-relay-demo"), nats.Timeout(time.Second))
		return err
	})
	if err == nil {
		js, err = jetstream.New(nc)
	}
	if err == nil {
		err = poll(ctx, r, "stream "+stream, func() error {
			_, err := js.Stream(ctx, stream)
			return err
		})
	}
	if err == nil {
		err = poll(ctx, r, fmt.Sprintf("%d checkpoints in bucket %s", sources, bucket), func() error {
			kv, err := js.KeyValue(ctx, bucket)
			if err != nil {
				return err
			}
			keys, err := kv.Keys(ctx)
			// A source with derived state conditions also records them under "_derived."
			// and its key: that is not a checkpoint.
			keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "_derived.") })
			if err == nil && len(keys) < sources {
				err = fmt.Errorf("%d so far: %v", len(keys), keys)
			}
			return err
		})
	}
	if err != nil && nc != nil {
		nc.Close()
	}
	return nc, js, err
}

// poll calls try until it returns nil, the relay exits or ctx ends.
func poll(ctx context.Context, r *child.Process, what string, try func() error) error {
	for {
		last := try()
		if last == nil {
			return nil
		}
		select {
		case <-r.Done():
			return fmt.Errorf("relay exited while waiting for %s: %v", what, r.Err())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// consume reads the whole stream with an ordered consumer and hands every message to the
// returned channel until ctx ends.
func consume(ctx context.Context, js jetstream.JetStream) (<-chan received, jetstream.ConsumeContext, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, nil, fmt.Errorf("ordered consumer on %s: %w", stream, err)
	}
	ch := make(chan received, eventBuffer)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case ch <- received{seq: seq(m), subject: m.Subject(), header: m.Headers(), data: m.Data()}:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("consume %s: %w", stream, err)
	}
	return ch, cc, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// seq is a message's stream sequence, 0 when it has no metadata.
func seq(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
}

// printTail writes the end of the relay's log (kept at path) to stderr.
func printTail(r *child.Process, path string) {
	lines := strings.Split(r.Tail(logTailLines), "\n")
	fmt.Fprintf(os.Stderr, "demo: last %d lines of the relay log %s:\n", len(lines), path)
	for _, l := range lines {
		fmt.Fprintln(os.Stderr, "  | "+l)
	}
}

func say(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

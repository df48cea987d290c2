package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

const (
	// prefix is the subject prefix of every contender, the relay's default.
	prefix = "kube"
	// duplicateWindow is the stream's duplicate window, the relay's default
	// (RELAY_DUPLICATE_WINDOW), so that every contender publishes to the same kind of stream.
	duplicateWindow = 10 * time.Minute
	// pollInterval paces the polls that detect completion (stream message count, checkpoint):
	// fine enough for runs of a second or more, light enough not to load the server.
	pollInterval = 20 * time.Millisecond
)

// Namespaces of the scenarios' objects.
const (
	nsSync   = "bench-sync"
	nsSteady = "bench-steady"
	nsMemory = "bench-mem"
)

// Env is the test bed of a benchmark run: a real etcd, kube-apiserver and nats-server on
// loopback, clients for them, and the pids of the servers for CPU accounting.
type Env struct {
	cfg  Config
	test *testenv.Env
	// rest has no client-side rate limit: the harness's own reads and writes must not be
	// throttled by client-go.
	rest *rest.Config
	// kube is a typed client speaking protobuf, the cheapest for the load generator and the
	// reference watch; dyn reads JSON into unstructured objects, as the relay does.
	kube kubernetes.Interface
	// watchKube is kube on a TCP connection of its own (client-go shares one HTTP/2
	// connection among clients of equal TLS settings unless Dial is set): the reference watch
	// must not queue behind the load generator's requests.
	watchKube kubernetes.Interface
	dyn       dynamic.Interface
	nc        *nats.Conn
	js        jetstream.JetStream
	// servers maps etcd, kube-apiserver and nats-server to their pids.
	servers map[string]int
	// setup records the preparation steps for the report.
	setup []SetupStep
	// writes numbers the values written, see writeValue.
	writes atomic.Int64
	// pad is the padding of updated objects, the size of a created object's.
	pad  string
	logf func(format string, args ...any)
}

// noteSetup records a preparation step and logs it.
func (e *Env) noteSetup(what string, n int, rate float64, took time.Duration) {
	e.setup = append(e.setup, SetupStep{What: what, N: n, Rate: rate, Took: took})
	e.logf("%s: %d in %s (%.0f/s)", what, n, took.Round(time.Millisecond), rate)
}

// writeValue returns a value no write of this run has used, so that every write is a real
// change (a patch to the same value is a no-op that produces no event).
func (e *Env) writeValue() string { return strconv.FormatInt(e.writes.Add(1), 10) }

// StartEnv starts the test bed under a fresh temporary directory.
func StartEnv(ctx context.Context, cfg Config) (e *Env, err error) {
	dir, err := os.MkdirTemp("", "kube-nats-relay-bench-")
	if err != nil {
		return nil, err
	}
	te, err := testenv.Start(ctx, testenv.Options{Kube: true, NATS: true, Dir: dir})
	if err != nil {
		return nil, err
	}
	e = &Env{cfg: cfg, test: te, logf: cfg.logf, pad: padding(cfg.ObjectBytes - metadataBytes)}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	if err := e.kubeClients(); err != nil {
		return nil, err
	}
	if e.nc, err = nats.Connect(te.NATS.URL()); err != nil {
		return nil, err
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		return nil, err
	}
	dirs := []string{filepath.Join(dir, "kube"), filepath.Join(dir, "nats")}
	if e.servers, err = findServers(dirs, "etcd", "kube-apiserver", "nats-server"); err != nil {
		return nil, err
	}
	if err := e.createNamespaces(ctx, nsSync, nsSteady, nsMemory); err != nil {
		return nil, err
	}
	return e, nil
}

// kubeClients builds the Kubernetes clients for e.test.Kube.
func (e *Env) kubeClients() (err error) {
	e.rest = rest.CopyConfig(e.test.Kube.RESTConfig())
	e.rest.QPS, e.rest.Burst = -1, 0 // negative QPS: no rate limiter
	proto := rest.CopyConfig(e.rest)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if e.kube, err = kubernetes.NewForConfig(proto); err != nil {
		return err
	}
	own := rest.CopyConfig(proto)
	own.Dial = (&net.Dialer{}).DialContext
	if e.watchKube, err = kubernetes.NewForConfig(own); err != nil {
		return err
	}
	e.dyn, err = dynamic.NewForConfig(e.rest)
	return err
}

func (e *Env) createNamespaces(ctx context.Context, names ...string) error {
	for _, ns := range names {
		_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// withEtcdHistory returns a view of e on a second control plane whose apiserver has no watch
// cache for configmaps (--watch-cache-sizes=configmaps#0): watches from an old
// resourceVersion are served from etcd's history, which the apiserver compacts only every 5
// minutes. The view shares NATS; stop ends the second control plane.
func (e *Env) withEtcdHistory(ctx context.Context) (v *Env, stop func(), err error) {
	dir := filepath.Join(e.test.Dir, "kube-etcd-history")
	cp, err := testenv.StartControlPlane(ctx, dir, testenv.ControlPlaneOptions{
		ExtraAPIServerArgs: []string{"--watch-cache-sizes=configmaps#0"},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("start a control plane without watch cache for configmaps: %w", err)
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	v = &Env{cfg: e.cfg, test: &testenv.Env{Dir: e.test.Dir, Kube: cp, NATS: e.test.NATS},
		nc: e.nc, js: e.js, pad: e.pad, logf: e.logf}
	if err := v.kubeClients(); err != nil {
		return nil, nil, err
	}
	if v.servers, err = findServers([]string{dir}, "etcd", "kube-apiserver"); err != nil {
		return nil, nil, err
	}
	v.servers["nats-server"] = e.servers["nats-server"]
	if err := v.createNamespaces(ctx, nsSync); err != nil {
		return nil, nil, err
	}
	return v, cp.Stop, nil
}

// Stop stops every server and removes the state directory.
func (e *Env) Stop() {
	if e.nc != nil {
		e.nc.Close()
	}
	e.test.Stop()
}

// Keys of the CPU accounting besides the servers' names.
const (
	// cpuHarness is this process: load generator, consumer, raw watch, ceiling.
	cpuHarness = "harness"
	// cpuMachine is every CPU's busy time: what is left after the contender, the servers
	// and the harness is other work sharing the machine.
	cpuMachine = "machine"
)

// serverCPU returns the CPU seconds each server, the harness and the whole machine have used
// so far.
func (e *Env) serverCPU() map[string]float64 {
	out := make(map[string]float64, len(e.servers)+2)
	for name, pid := range e.servers {
		out[name] = procCPU(pid)
	}
	out[cpuHarness] = procCPU(os.Getpid())
	out[cpuMachine] = machineBusy()
	return out
}

func cpuDelta(before, after map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(after))
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// names are the JetStream resources of one contender: its cluster (and so its subjects), its
// stream and, for the relay, its buckets. Contenders get clusters of equal length, so their
// subjects and headers have the same sizes.
type names struct {
	cluster, stream, checkpoints, index string
}

func namesFor(contender string) names {
	c := "bench-" + contender[:1] // bench-r, bench-n, bench-c: equal lengths
	if contender == RelayBefore {
		c = "bench-b" // not the relay's
	}
	return names{
		cluster:     c,
		stream:      strings.ToUpper(strings.ReplaceAll(c, "-", "_")),
		checkpoints: c + "-ckpt",
		index:       c + "-index",
	}
}

// freshStream deletes the contender's stream and buckets if they exist and creates the
// stream as the relay would (relay.EnsureStream with the relay's defaults).
func (e *Env) freshStream(ctx context.Context, n names) error {
	e.dropStream(ctx, n)
	_, err := relay.EnsureStream(ctx, e.js, relay.StreamConfig{
		Name: n.stream, Prefix: prefix, Cluster: n.cluster, Replicas: 1, Duplicates: duplicateWindow,
	})
	return err
}

// dropStream deletes the contender's stream and buckets, ignoring those that do not exist.
func (e *Env) dropStream(ctx context.Context, n names) {
	_ = e.js.DeleteStream(ctx, n.stream)
	for _, b := range []string{n.checkpoints, n.index} {
		_ = e.js.DeleteKeyValue(ctx, b)
	}
}

// streamMsgs returns the number of messages in the stream.
func (e *Env) streamMsgs(ctx context.Context, stream string) (uint64, error) {
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// waitStream polls until the stream holds at least want messages and returns when that was
// first seen. It gives up when ctx ends or when failed reports an error (the contender died).
func (e *Env) waitStream(ctx context.Context, stream string, want uint64, failed func() error) (time.Time, error) {
	var have uint64
	for {
		n, err := e.streamMsgs(ctx, stream)
		if err == nil {
			have = n
			if n >= want {
				return time.Now(), nil
			}
		}
		if failed != nil {
			if err := failed(); err != nil {
				return time.Time{}, fmt.Errorf("%w (stream %s has %d of %d messages)", err, stream, have, want)
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("stream %s has %d of %d messages: %w", stream, have, want, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

// waitCheckpoint polls the relay's checkpoint until it is at least minRV ("" accepts any)
// and returns when that was first seen.
func (e *Env) waitCheckpoint(ctx context.Context, n names, namespace, minRV string, failed func() error) (time.Time, error) {
	return e.waitKey(ctx, n, checkpointKey(n.cluster, namespace), minRV, failed)
}

// waitKey waits until the checkpoint under key is written and at least minRV ("" for any).
func (e *Env) waitKey(ctx context.Context, n names, key, minRV string, failed func() error) (time.Time, error) {
	var last string
	for {
		if rv, err := e.checkpoint(ctx, n, key); err == nil {
			last = rv
			if rv != "" && (minRV == "" || !rvLess(rv, minRV)) {
				return time.Now(), nil
			}
		}
		if failed != nil {
			if err := failed(); err != nil {
				return time.Time{}, fmt.Errorf("%w (checkpoint %q, waiting for %q)", err, last, minRV)
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("checkpoint %s is %q, waiting for %q: %w", key, last, minRV, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

// checkpoint returns the resourceVersion stored under key, "" when there is none yet.
func (e *Env) checkpoint(ctx context.Context, n names, key string) (string, error) {
	kv, err := e.js.KeyValue(ctx, n.checkpoints)
	if err != nil {
		return "", err
	}
	entry, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return checkpoint.ResourceVersion(entry.Value())
}

// checkpointKey is the relay's checkpoint key for configmaps in namespace.
func checkpointKey(cluster, namespace string) string {
	return relay.CheckpointKey(relay.SourceConfig{
		Cluster:   cluster,
		Resource:  configMapResource,
		Namespace: namespace,
	})
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// ceilingWindow is the ceiling's bound on unacknowledged publishes: the relay's default
	// RELAY_MAX_INFLIGHT, so that the two differ in everything but the window.
	ceilingWindow = 256
	// ceilingStallWait is how long a ceiling publish may wait for room in the window; the
	// client's default (200ms) turns a busy moment on a shared machine into an error.
	ceilingStallWait = time.Minute
)

// errRunTimeout is the cause of a contender run that exceeded Config.RunTimeout.
var errRunTimeout = errors.New("run timed out")

// meter measures one contender run: wall time from its start and the servers' CPU.
type meter struct {
	e      *Env
	start  time.Time
	before map[string]float64
}

func (e *Env) meter() meter { return meter{e: e, start: time.Now(), before: e.serverCPU()} }

// since returns the time from the start to t.
func (m meter) since(t time.Time) time.Duration { return t.Sub(m.start) }

// servers returns the servers' CPU seconds since the start.
func (m meter) servers() map[string]float64 { return cpuDelta(m.before, m.e.serverCPU()) }

// startFromNothing starts contender's initial sync of namespace: a fresh stream (and, for a
// relay, fresh buckets), then the process, publishing what it lists; the meter starts just
// before the process. end stops the process and drops the stream; on error nothing is left to
// end.
func (e *Env) startFromNothing(ctx context.Context, contender, namespace string) (c *child, m meter, nm names, end func(), err error) {
	nm = namesFor(contender)
	if err := e.freshStream(ctx, nm); err != nil {
		return nil, meter{}, nm, nil, err
	}
	m = e.meter()
	if c, err = e.startContender(contender, nm, namespace, "publish"); err != nil {
		e.dropStream(context.WithoutCancel(ctx), nm)
		return nil, meter{}, nm, nil, err
	}
	end = func() {
		_, _ = c.stop()
		e.dropStream(context.WithoutCancel(ctx), nm)
	}
	return c, m, nm, end, nil
}

// startContender starts the relay binary or the naive relay over namespace, publishing to
// n's stream; initialSync is the relay's RELAY_INITIAL_SYNC (the naive relay always
// publishes what its informer lists).
func (e *Env) startContender(contender string, n names, namespace, initialSync string) (*child, error) {
	return e.startContenderOf(contender, n, configMapResource.Resource, namespace, initialSync)
}

// startContenderOf is startContender for another resource of the core group (pods).
func (e *Env) startContenderOf(contender string, n names, resource, namespace, initialSync string) (*child, error) {
	logPath := filepath.Join(e.cfg.LogDir, contender+".log")
	switch contender {
	case Relay, RelayBefore:
		bin := e.cfg.RelayBin
		if contender == RelayBefore {
			bin = e.cfg.BaselineBin
		}
		return startChild(contender, bin, nil, []string{
			"KUBECONFIG=" + e.test.Kube.KubeconfigPath(),
			"NATS_URL=" + e.test.NATS.URL(),
			"RELAY_RESOURCES=" + resource,
			"RELAY_NAMESPACES=" + namespace,
			"RELAY_CLUSTER=" + n.cluster,
			"RELAY_STREAM=" + n.stream,
			"RELAY_CHECKPOINT_BUCKET=" + n.checkpoints,
			"RELAY_INDEX_BUCKET=" + n.index,
			"RELAY_INITIAL_SYNC=" + initialSync,
			"RELAY_HTTP_ADDR=127.0.0.1:0", // probes on a free loopback port
			"RELAY_LOG_LEVEL=info",
			"GODEBUG=gctrace=1",
		}, logPath)
	case Naive, NaiveLean:
		return startChild(contender, e.cfg.SelfBin, []string{"naive",
			"-kubeconfig", e.test.Kube.KubeconfigPath(),
			"-nats", e.test.NATS.URL(),
			"-namespace", namespace,
			"-cluster", n.cluster,
			"-resource", resource,
			"-lean=" + strconv.FormatBool(contender == NaiveLean),
		}, []string{"GODEBUG=gctrace=1"}, logPath)
	}
	return nil, fmt.Errorf("contender %s is not a process", contender)
}

// waitReady waits until a started contender watches: the relay logs "watching" once its
// list is handed to the pipeline and its watch is open; the naive relay prints naiveReady
// once its informer synced and every listed object was published.
func waitReady(ctx context.Context, c *child) error {
	if isRelay(c.name) {
		return c.waitLine(ctx, `"message":"watching"`)
	}
	return c.waitLine(ctx, naiveReady)
}

// publishAll is the ceiling: it publishes msgs asynchronously over its own connection with
// at most ceilingWindow unacknowledged, and returns when every ack is in.
func (e *Env) publishAll(ctx context.Context, msgs []*nats.Msg) (time.Duration, error) {
	nc, err := nats.Connect(e.test.NATS.URL())
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(ceilingWindow))
	if err != nil {
		return 0, err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	start := time.Now()
	for _, m := range msgs {
		f, err := js.PublishMsgAsync(m, jetstream.WithStallWait(ceilingStallWait))
		if err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, fmt.Errorf("%d acks outstanding: %w", js.PublishAsyncPending(), context.Cause(ctx))
	}
	took := time.Since(start)
	failed := 0
	var first error
	for _, f := range futures {
		select {
		case err := <-f.Err():
			if failed++; first == nil {
				first = err
			}
		default:
		}
	}
	if failed > 0 {
		return took, fmt.Errorf("%d of %d publishes failed, first: %w", failed, len(msgs), first)
	}
	return took, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func avgSize(msgs []*nats.Msg) int {
	if len(msgs) == 0 {
		return 0
	}
	total := 0
	for _, m := range msgs {
		total += msgSize(m)
	}
	return total / len(msgs)
}

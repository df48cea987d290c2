package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// nsPods is the namespace of the pods scenario's Deployment.
const nsPods = "bench-pods"

const (
	// podsReadyPoll paces the wait for the Deployment's Pods to run: a list of thousands of
	// Pods every second is light next to their creation.
	podsReadyPoll = time.Second
	// podsReadyTimeoutPerPod bounds that wait, per Pod, on top of RunTimeout: the
	// controllers, the scheduler and kwok create, bind and start a few hundred Pods a second
	// on 2 idle cores; ten times slower is still a result worth waiting for.
	podsReadyTimeoutPerPod = 50 * time.Millisecond
)

var podResource = relay.Resource{
	GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
	Kind:                 "Pod",
	Namespaced:           true,
}

// podsContenders are the contenders of the pods scenario: the relay beside the naive relay
// (and relay-before with a baseline). The ceiling and raw readers have their rows in the
// ConfigMap scenarios; here the apiserver's own churn is the load.
var podsContenders = []string{Naive, Relay}

// runPods is the pods scenario: the controllers, the scheduler and kwok start next to the
// control plane, a Deployment of Config.Pods Pods runs on simulated nodes with its Pods'
// status churning (podchurn.go), and each contender in turn syncs the Pods from nothing and
// then relays the churn for Config.PodsWindow. Then the relay relays the budget scenario's
// large Secrets. Everything the scenario started is stopped when it returns; its Pods stay in
// the control plane.
func (e *Env) runPods(ctx context.Context) (res *Pods, err error) {
	sched := newChurnSchedule(e.cfg.PodChurnPeriod)
	res = &Pods{Pods: e.cfg.Pods, Nodes: podNodes(e.cfg.Pods), ChurnPeriod: sched.cycle(),
		ChurnAsked: sched.rate(e.cfg.Pods), Window: e.cfg.PodsWindow, Runs: map[string][]PodsRun{}}
	dir := filepath.Join(e.test.Dir, "cluster")
	start := time.Now()
	cl, err := testenv.StartCluster(ctx, e.test.Kube, dir, testenv.ClusterOptions{
		Nodes: res.Nodes, ExtraConfig: sched.stages(), DisableQPSLimits: true,
	})
	if err != nil {
		return res, fmt.Errorf("start controllers, scheduler and kwok: %w", err)
	}
	defer cl.Stop()
	e.noteSetup("start controllers, scheduler, kwok and its nodes", res.Nodes, float64(res.Nodes)/time.Since(start).Seconds(), time.Since(start))
	// Their CPU counts as the servers' (not as other load) while the scenario runs.
	pids, err := findServers([]string{dir}, "kube-controller-manager", "kube-scheduler", "kwok")
	if err != nil {
		return res, err
	}
	maps.Copy(e.servers, pids)
	defer func() { maps.DeleteFunc(e.servers, func(k string, _ int) bool { _, ok := pids[k]; return ok }) }()

	if err := e.createNamespaces(ctx, nsPods); err != nil && !apierrors.IsAlreadyExists(err) {
		return res, err
	}
	if err := e.runDeployment(ctx, e.cfg.Pods); err != nil {
		return res, err
	}
	if res.BodyMin, res.BodyAvg, res.BodyMax, err = e.podSizes(ctx); err != nil {
		return res, err
	}
	e.logf("pods: %d Pods on %d nodes, JSON as published %d-%d bytes (mean %d); churn asks %.0f updates/s",
		res.Pods, res.Nodes, res.BodyMin, res.BodyMax, res.BodyAvg, res.ChurnAsked)

	for round := range e.cfg.Rounds {
		for _, c := range rotate(e.cfg.withBaseline(podsContenders), round) {
			runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout+e.cfg.PodsWindow, errRunTimeout)
			run := e.podsOnce(runCtx, c)
			cancel()
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			run.Round = round + 1
			run.Sync.Round = run.Round
			res.Runs[c] = append(res.Runs[c], run)
			e.logRun("pods sync", c, run.Sync)
			if s := run.Steady; s.Err != "" {
				e.logf("pods steady round %d %-9s FAILED: %s", run.Round, c, s.Err)
			} else {
				e.logf("pods steady round %d %-9s %d changes in %s (%.0f/s), %d published, own p50 %s p99 %s, cpu %.2fs, RSS %.1f MiB",
					run.Round, c, s.Changes, s.Window.Round(time.Millisecond), float64(s.Changes)/s.Window.Seconds(), s.Published,
					ms(s.Own.P50), ms(s.Own.P99), s.CPU, mib(s.RSS))
			}
		}
	}
	res.Secrets, err = e.runLargeSecrets(ctx)
	return res, err
}

// runDeployment creates the Deployment of n Pods (unless it exists) and waits until n of its
// Pods are Running.
func (e *Env) runDeployment(ctx context.Context, n int) error {
	start := time.Now()
	d := podDeployment(nsPods, n)
	if _, err := e.kube.AppsV1().Deployments(nsPods).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create deployment %s/%s: %w", nsPods, d.Name, err)
	}
	timeout := e.cfg.RunTimeout + time.Duration(n)*podsReadyTimeoutPerPod
	running, logged := 0, time.Now()
	err := wait.PollUntilContextTimeout(ctx, podsReadyPoll, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if running, err = e.runningPods(ctx); err != nil {
			return false, nil // a busy apiserver may time a list out: try again
		}
		if time.Since(logged) > 10*time.Second {
			e.logf("  %d of %d Pods running", running, n)
			logged = time.Now()
		}
		return running >= n, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %d of %d Pods running after %s: %w", nsPods, d.Name, running, n, timeout, err)
	}
	e.noteSetup(fmt.Sprintf("run a Deployment of Pods in %s (created, scheduled, started by kwok)", nsPods), n, float64(n)/time.Since(start).Seconds(), time.Since(start))
	return nil
}

// runningPods counts the Pods of nsPods in phase Running, reading pages in protobuf.
func (e *Env) runningPods(ctx context.Context) (int, error) {
	n, cont := 0, ""
	for {
		page, err := e.kube.CoreV1().Pods(nsPods).List(ctx, metav1.ListOptions{Limit: listPageSize, Continue: cont})
		if err != nil {
			return n, err
		}
		for i := range page.Items {
			if page.Items[i].Status.Phase == corev1.PodRunning {
				n++
			}
		}
		if cont = page.Continue; cont == "" {
			return n, nil
		}
	}
}

// podSizes measures the Pods' JSON as the relay publishes it (managedFields stripped).
func (e *Env) podSizes(ctx context.Context) (lo, mean, hi int, err error) {
	total, n, cont := 0, 0, ""
	for {
		page, err := e.dyn.Resource(podResource.GroupVersionResource).Namespace(nsPods).
			List(ctx, metav1.ListOptions{Limit: listPageSize, Continue: cont})
		if err != nil {
			return 0, 0, 0, fmt.Errorf("list %s: %w", nsPods, err)
		}
		for i := range page.Items {
			o := &page.Items[i]
			unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
			b, err := o.MarshalJSON()
			if err != nil {
				return 0, 0, 0, err
			}
			if n == 0 || len(b) < lo {
				lo = len(b)
			}
			hi = max(hi, len(b))
			total += len(b)
			n++
		}
		if cont = page.GetContinue(); cont == "" {
			break
		}
	}
	if n == 0 {
		return 0, 0, 0, fmt.Errorf("no Pods in %s", nsPods)
	}
	return lo, total / n, hi, nil
}

// podsOnce runs one contender: its initial sync of the Pods (timed until an `added` event of
// every Pod is in its stream, and for the relay until its checkpoint is written), then
// Config.PodsWindow of churn.
func (e *Env) podsOnce(ctx context.Context, contender string) (run PodsRun) {
	n := e.cfg.Pods
	run.Sync = TimedRun{Events: n}
	fail := func(err error) PodsRun {
		if run.Sync.Took == 0 {
			run.Sync.Err = err.Error()
		}
		run.Steady.Err = err.Error()
		return run
	}
	nm := namesFor(contender)
	if err := e.freshStream(ctx, nm); err != nil {
		return fail(err)
	}
	defer e.dropStream(context.WithoutCancel(ctx), nm)
	// Churn goes on during the sync, so the stream holds modified events too: the sync is
	// done when it holds an added event of every Pod.
	added, err := e.js.CreateConsumer(ctx, nm.stream, jetstream.ConsumerConfig{
		FilterSubject:     event.Filter{Prefix: prefix, Cluster: nm.cluster, Version: "v1", Resource: "pods", Namespace: nsPods, Type: event.Added}.String(),
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fail(fmt.Errorf("count added events: %w", err))
	}
	m := e.meter()
	c, err := e.startContenderOf(contender, nm, podResource.Resource, nsPods, "publish")
	if err != nil {
		return fail(err)
	}
	defer func() { _, _ = c.stop() }()
	first, err := waitPending(ctx, added, 1, c.failed)
	if err != nil {
		return fail(err)
	}
	done, err := waitPending(ctx, added, uint64(n), c.failed)
	if err != nil {
		return fail(err)
	}
	run.Sync.ServerCPU, run.Sync.CPU = m.servers(), c.cpu()
	run.Sync.FirstAt, run.Sync.Took = m.since(first), m.since(done)
	if isRelay(contender) {
		key := relay.CheckpointKey(relay.SourceConfig{Cluster: nm.cluster, Resource: podResource, Namespace: nsPods})
		ck, err := e.waitKey(ctx, nm, key, "", c.failed)
		if err != nil {
			return fail(fmt.Errorf("checkpoint: %w", err))
		}
		run.Sync.CheckpointAt = m.since(ck)
	}
	_, run.Sync.PeakRSS = procMemory(c.pid())
	if err := waitReady(ctx, c); err != nil {
		run.Steady.Err = err.Error()
		return run
	}
	run.Steady = e.podsSteady(ctx, c, nm)
	if _, err := c.stop(); err != nil && run.Steady.Err == "" {
		run.Steady.Err = err.Error()
	}
	return run
}

// waitPending polls the consumer until at least want messages match its filter, and returns
// when that was first seen.
func waitPending(ctx context.Context, cons jetstream.Consumer, want uint64, failed func() error) (time.Time, error) {
	var have uint64
	for {
		if info, err := cons.Info(ctx); err == nil {
			if have = info.NumPending; have >= want {
				return time.Now(), nil
			}
		}
		if err := failed(); err != nil {
			return time.Time{}, fmt.Errorf("%w (%d of %d added events)", err, have, want)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d added events: %w", have, want, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

// podsSteady measures a synced contender for Config.PodsWindow of churn: the Pod updates a
// watch of its own sees (the rate the cluster sustained), what the contender published, its
// CPU and memory, and for the relay its own latency from its metrics.
func (e *Env) podsSteady(ctx context.Context, c *child, nm names) (s PodsSteady) {
	changes, stop, err := e.countPodChanges(ctx)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	defer stop()
	var addr string
	var lag0 histogram
	if isRelay(c.name) {
		if addr, err = c.httpAddr(); err == nil {
			lag0, err = scrapeLag(ctx, addr)
		}
		if err != nil {
			e.logf("pods steady: relay metrics: %v", err)
			addr = ""
		}
	}
	msgs0, err := e.streamMsgs(ctx, nm.stream)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	cpu0, seen0, start := c.cpu(), changes(), time.Now()
	select {
	case <-ctx.Done():
		s.Err = context.Cause(ctx).Error()
		return s
	case <-time.After(e.cfg.PodsWindow):
	}
	s.Window, s.Changes, s.CPU = time.Since(start), changes()-seen0, c.cpu()-cpu0
	msgs1, err := e.streamMsgs(ctx, nm.stream)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	s.Published = int(msgs1 - msgs0)
	s.RSS, s.PeakRSS = procMemory(c.pid())
	if addr != "" {
		if lag1, err := scrapeLag(ctx, addr); err != nil {
			e.logf("pods steady: relay metrics: %v", err)
		} else {
			s.Own = ownLatency(lag0, lag1)
		}
	}
	if err := c.failed(); err != nil {
		s.Err = err.Error()
	}
	return s
}

// countPodChanges watches nsPods from now on (protobuf, a connection of its own) and returns
// a function that tells how many changes it has seen so far.
func (e *Env) countPodChanges(ctx context.Context) (seen func() int, stop func(), err error) {
	pods := e.watchKube.CoreV1().Pods(nsPods)
	list, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, nil, err
	}
	var n atomic.Int64
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				n.Add(1)
			}
		}
	}()
	seen = func() int { return int(n.Load()) }
	return seen, w.Stop, nil
}

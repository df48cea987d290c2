package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// relistLine is what the relay logs when it cannot resume and lists again: the run is then
// a catch-up by relist, reported as such.
const relistLine = "resourceVersion expired, relisting"

// Where a catch-up's history comes from.
const (
	// HistoryWatchCache is the apiserver's default: watches are served from its watch cache,
	// which keeps a bounded, dynamically sized window of events per resource.
	HistoryWatchCache = "watch-cache"
	// HistoryEtcd is an apiserver without watch cache for configmaps: watches are served from
	// etcd, whose history lasts until the apiserver compacts it (every 5 minutes).
	HistoryEtcd = "etcd"
)

// runCatchup runs scenario 2 once per history source in Config.CatchupHistory.
func (e *Env) runCatchup(ctx context.Context) ([]*Throughput, error) {
	var out []*Throughput
	for _, h := range e.cfg.CatchupHistory {
		env, stop := e, func() {}
		if h == HistoryEtcd {
			e.logf("catchup: starting a second control plane without watch cache for configmaps")
			v, s, err := e.withEtcdHistory(ctx)
			if err != nil {
				return out, err
			}
			env, stop = v, s
			start := time.Now()
			rate, err := env.createObjects(ctx, nsSync, 0, e.cfg.SyncObjects)
			if err != nil {
				stop()
				return out, err
			}
			e.noteSetup("create ConfigMaps in "+nsSync+" (control plane without configmaps watch cache)", e.cfg.SyncObjects, rate, time.Since(start))
		}
		res, err := env.catchup(ctx, h)
		stop()
		if res != nil {
			out = append(out, res)
		}
		if err != nil {
			return out, fmt.Errorf("history from %s: %w", h, err)
		}
	}
	return out, nil
}

// catchup is scenario 2: the relay has published every object of nsSync and stopped;
// CatchupChanges updates are made; each contender is timed from its start until every
// change is acknowledged (raw watch: read). The ceiling publishes the changed objects; the
// naive relay, which has no checkpoint, republishes every object (the changes among them).
func (e *Env) catchup(ctx context.Context, history string) (*Throughput, error) {
	n, k := e.cfg.SyncObjects, e.cfg.CatchupChanges
	res := &Throughput{Events: k, History: history, Runs: map[string][]TimedRun{}}
	var writeRates []float64
	relays := e.cfg.relays()
	for _, c := range relays {
		defer e.dropStream(context.WithoutCancel(ctx), namesFor(c))
	}
	for round := range e.cfg.Rounds {
		// The relay's state before the stop: every object published, checkpoint written.
		for _, c := range relays {
			e.logf("catchup round %d: %s initial sync of %d objects", round+1, c, n)
			if err := e.primeRelay(ctx, c, namesFor(c)); err != nil {
				return res, fmt.Errorf("prepare the %s: %w", c, err)
			}
		}
		_, rv0, err := e.countObjects(ctx, nsSync)
		if err != nil {
			return res, err
		}
		e.logf("catchup round %d: %d changes while stopped", round+1, k)
		changes, rate, err := e.updateObjects(ctx, nsSync, round*k, k, n)
		if err != nil {
			return res, err
		}
		writeRates = append(writeRates, rate)
		msgs, err := e.changedMessages(ctx, changes)
		if err != nil {
			return res, err
		}
		res.MsgBytes = avgSize(msgs)
		lastRV := maxRV(changes)
		for _, c := range rotate(e.cfg.contenders(), round) {
			runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
			var run TimedRun
			switch c {
			case Ceiling:
				run = e.syncCeiling(runCtx, msgs)
			case RawWatch:
				run = e.catchupRaw(runCtx, rv0, k)
			case Naive:
				// No checkpoint: it republishes every object, the changed ones among them.
				run = e.syncProcess(runCtx, Naive, nsSync, e.cfg.SyncObjects)
				run.Published, run.Events = run.Events, k
			case Relay, RelayBefore:
				run = e.catchupRelay(runCtx, c, namesFor(c), uint64(n+k), lastRV)
			}
			cancel()
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			run.Round = round + 1
			res.Runs[c] = append(res.Runs[c], run)
			e.logRun("catchup ("+history+")", c, run)
		}
		for _, c := range relays {
			e.dropStream(ctx, namesFor(c))
		}
	}
	res.WriteRate = median(writeRates)
	return res, nil
}

// primeRelay runs the relay (or the baseline's, RelayBefore) from nothing over nsSync until its checkpoint covers the initial
// sync, then stops it gracefully.
func (e *Env) primeRelay(ctx context.Context, contender string, nm names) error {
	ctx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
	defer cancel()
	if err := e.freshStream(ctx, nm); err != nil {
		return err
	}
	c, err := e.startContender(contender, nm, nsSync, "publish")
	if err != nil {
		return err
	}
	defer func() { _, _ = c.stop() }()
	if _, err := e.waitStream(ctx, nm.stream, uint64(e.cfg.SyncObjects), c.failed); err != nil {
		return err
	}
	if _, err := e.waitCheckpoint(ctx, nm, nsSync, "", c.failed); err != nil {
		return err
	}
	_, err = c.stop()
	return err
}

// changedMessages builds the events of the changed objects as the relay publishes them.
func (e *Env) changedMessages(ctx context.Context, changes []change) ([]*nats.Msg, error) {
	objs, _, err := e.listObjects(ctx, nsSync)
	if err != nil {
		return nil, err
	}
	changed := make(map[string]bool, len(changes))
	for _, c := range changes {
		changed[c.name] = true
	}
	var picked []unstructured.Unstructured
	for _, o := range objs {
		if changed[o.GetName()] {
			picked = append(picked, o)
		}
	}
	return messages(picked, namesFor(Ceiling).cluster, event.Modified, event.Live)
}

// catchupRelay restarts the primed relay and waits until the stream holds want messages and
// the checkpoint has reached lastRV.
func (e *Env) catchupRelay(ctx context.Context, contender string, nm names, want uint64, lastRV string) TimedRun {
	run := TimedRun{Events: e.cfg.CatchupChanges}
	m := e.meter()
	c, err := e.startContender(contender, nm, nsSync, "publish")
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer func() { _, _ = c.stop() }()
	first, err := e.waitStream(ctx, nm.stream, want-uint64(e.cfg.CatchupChanges)+1, c.failed)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	done, err := e.waitStream(ctx, nm.stream, want, c.failed)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.FirstAt, run.Took, run.ServerCPU, run.CPU = m.since(first), m.since(done), m.servers(), c.cpu()
	ck, err := e.waitCheckpoint(ctx, nm, nsSync, lastRV, c.failed)
	if err != nil {
		run.Err = "checkpoint: " + err.Error()
		return run
	}
	run.CheckpointAt = m.since(ck)
	_, run.PeakRSS = procMemory(c.pid())
	// A relist is reported with its time: it is how the relay catches up when the apiserver
	// no longer has the history.
	run.Relisted = c.saw(relistLine)
	if _, err := c.stop(); err != nil && run.Err == "" {
		run.Err = err.Error()
	}
	return run
}

// catchupRaw watches from rv0, the resourceVersion before the changes, until it has read k
// changes.
func (e *Env) catchupRaw(ctx context.Context, rv0 string, k int) TimedRun {
	run := TimedRun{Events: k}
	m := e.meter()
	w, err := e.dyn.Resource(configMapResource.GroupVersionResource).Namespace(nsSync).
		Watch(ctx, metav1.ListOptions{ResourceVersion: rv0})
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer w.Stop()
	seen := 0
	for seen < k {
		select {
		case <-ctx.Done():
			run.Err = fmt.Sprintf("read %d of %d changes: %v", seen, k, context.Cause(ctx))
			return run
		case ev, ok := <-w.ResultChan():
			if !ok {
				run.Err = fmt.Sprintf("watch ended after %d of %d changes", seen, k)
				return run
			}
			switch ev.Type {
			case watch.Error:
				run.Err = fmt.Sprintf("watch error after %d changes: %v", seen, apierrors.FromObject(ev.Object))
				return run
			case watch.Added, watch.Modified, watch.Deleted:
				seen++
			}
		}
	}
	run.Took, run.ServerCPU = time.Since(m.start), m.servers()
	return run
}

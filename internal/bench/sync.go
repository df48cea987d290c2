package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// runSync is scenario 1: SyncObjects ConfigMaps exist; each contender starts from nothing
// and is timed until every object is acknowledged by JetStream (bare lists: read).
func (e *Env) runSync(ctx context.Context) (*Throughput, error) {
	n := e.cfg.SyncObjects
	objs, _, err := e.listObjects(ctx, nsSync)
	if err != nil {
		return nil, err
	}
	if len(objs) != n {
		return nil, fmt.Errorf("namespace %s has %d objects, want %d", nsSync, len(objs), n)
	}
	msgs, err := messages(objs, namesFor(Ceiling).cluster, event.Added, event.InitialSync)
	if err != nil {
		return nil, err
	}
	objs = nil
	res := &Throughput{Events: n, MsgBytes: avgSize(msgs), Runs: map[string][]TimedRun{}}
	for round := range e.cfg.Rounds {
		for _, c := range rotate(e.cfg.syncContenders(), round) {
			run := e.syncOnce(ctx, c, nsSync, msgs)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			run.Round = round + 1
			res.Runs[c] = append(res.Runs[c], run)
			e.logRun("sync", c, run)
		}
	}
	return res, nil
}

// syncOnce runs one contender's initial sync of namespace, whose objects msgs are the
// events of, bounded by Config.RunTimeout.
func (e *Env) syncOnce(ctx context.Context, contender, namespace string, msgs []*nats.Msg) TimedRun {
	ctx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
	defer cancel()
	switch contender {
	case Ceiling:
		return e.syncCeiling(ctx, msgs)
	case BareList:
		return e.syncBare(ctx, namespace, len(msgs), contentJSON)
	case BareProto:
		return e.syncBare(ctx, namespace, len(msgs), contentProto)
	case MachineLimit:
		return e.syncMachineLimit(ctx, namespace, msgs)
	}
	return e.syncProcess(ctx, contender, namespace, len(msgs))
}

func (e *Env) logRun(scenario, contender string, r TimedRun) {
	if r.Err != "" {
		e.logf("%s round %d %-9s FAILED: %s", scenario, r.Round, contender, r.Err)
		return
	}
	e.logf("%s round %d %-9s %6d events in %8s: %7.0f/s (cpu %.2fs)", scenario, r.Round, contender,
		r.Events, r.Took.Round(time.Millisecond), r.Rate(), r.CPU)
}

func (e *Env) syncCeiling(ctx context.Context, msgs []*nats.Msg) TimedRun {
	nm := namesFor(Ceiling)
	run := TimedRun{Events: len(msgs)}
	if err := e.freshStream(ctx, nm); err != nil {
		run.Err = err.Error()
		return run
	}
	defer e.dropStream(context.WithoutCancel(ctx), nm)
	m := e.meter()
	took, err := e.publishAll(ctx, msgs)
	run.ServerCPU = m.servers()
	run.Took, run.Err = took, errString(err)
	return run
}

// syncProcess runs the relay binary or a naive relay over the n objects of namespace from
// nothing (fresh stream, no checkpoint) until the stream holds every object; for the relay
// also until its checkpoint is written, which happens once every event and index record is
// acknowledged.
func (e *Env) syncProcess(ctx context.Context, contender, namespace string, n int) TimedRun {
	run := TimedRun{Events: n}
	c, m, nm, end, err := e.startFromNothing(ctx, contender, namespace)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer end()
	first, err := e.waitStream(ctx, nm.stream, 1, c.failed)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	done, err := e.waitStream(ctx, nm.stream, uint64(n), c.failed)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.ServerCPU = m.servers()
	run.CPU = c.cpu()
	run.FirstAt, run.Took = m.since(first), m.since(done)
	if isRelay(contender) {
		ck, err := e.waitCheckpoint(ctx, nm, namespace, "", c.failed)
		if err != nil {
			run.Err = "checkpoint: " + err.Error()
			return run
		}
		run.CheckpointAt = m.since(ck)
	}
	_, run.PeakRSS = procMemory(c.pid())
	if _, err := c.stop(); err != nil {
		run.Err = err.Error()
	}
	return run
}

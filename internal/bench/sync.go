package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// runSync is scenario 1: SyncObjects ConfigMaps exist; each contender starts from nothing
// and is timed until every object is acknowledged by JetStream (raw watch: read).
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
			runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
			var run TimedRun
			switch c {
			case Ceiling:
				run = e.syncCeiling(runCtx, msgs)
			case RawWatch:
				run = e.syncRaw(runCtx)
			case RawProto:
				run = e.syncRawProto(runCtx)
			default:
				run = e.syncProcess(runCtx, c)
			}
			cancel()
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

// syncRaw reads every object the way the relay does (dynamic client, pages of 500) and
// publishes nothing.
func (e *Env) syncRaw(ctx context.Context) TimedRun {
	m := e.meter()
	objs, _, err := e.listObjects(ctx, nsSync)
	run := TimedRun{Events: len(objs), Took: time.Since(m.start), ServerCPU: m.servers(), Err: errString(err)}
	return run
}

// syncRawProto reads every object with a typed client in protobuf, pages of 500.
func (e *Env) syncRawProto(ctx context.Context) TimedRun {
	m := e.meter()
	n, cont := 0, ""
	for {
		page, err := e.kube.CoreV1().ConfigMaps(nsSync).List(ctx, metav1.ListOptions{Limit: listPageSize, Continue: cont})
		if err != nil {
			return TimedRun{Events: n, Err: err.Error()}
		}
		n += len(page.Items)
		if cont = page.Continue; cont == "" {
			break
		}
	}
	return TimedRun{Events: n, Took: time.Since(m.start), ServerCPU: m.servers()}
}

// syncProcess runs the relay binary or the naive relay from nothing (fresh stream, no
// checkpoint) until the stream holds every object; for the relay also until its checkpoint
// is written, which happens once every event and index record is acknowledged.
func (e *Env) syncProcess(ctx context.Context, contender string) TimedRun {
	n := e.cfg.SyncObjects
	run := TimedRun{Events: n}
	c, m, nm, end, err := e.startFromNothing(ctx, contender, nsSync)
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
		ck, err := e.waitCheckpoint(ctx, nm, nsSync, "", c.failed)
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

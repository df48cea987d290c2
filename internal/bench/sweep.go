package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// nsSweep holds the sweep's objects, topped up from one size to the next.
const nsSweep = "bench-sweep"

// sweepContenders are the contenders of the sweep: the relay and what it is measured
// against (the bare list is the machine limit's list half; the sweep leaves it out).
var sweepContenders = []string{MachineLimit, NaiveLean, Naive, Relay}

// runSweep is the initial sync at each size of Config.SweepObjects: nsSweep is filled up to
// the size, then the relay, the naive relays and the machine limit sync it from nothing,
// Config.SweepRounds times each. It gives the initial-sync plot its rate against object count.
func (e *Env) runSweep(ctx context.Context) ([]*Throughput, error) {
	if err := e.createNamespaces(ctx, nsSweep); err != nil {
		return nil, err
	}
	var out []*Throughput
	have := 0
	for _, size := range e.cfg.SweepObjects {
		start := time.Now()
		rate, err := e.createObjects(ctx, nsSweep, have, size)
		if err != nil {
			return out, err
		}
		e.noteSetup("create ConfigMaps in "+nsSweep, size-have, rate, time.Since(start))
		have = size
		objs, _, err := e.listObjects(ctx, nsSweep)
		if err != nil {
			return out, err
		}
		if len(objs) != size {
			return out, fmt.Errorf("namespace %s has %d objects, want %d", nsSweep, len(objs), size)
		}
		msgs, err := messages(objs, namesFor(Ceiling).cluster, event.Added, event.InitialSync)
		if err != nil {
			return out, err
		}
		objs = nil
		res := &Throughput{Events: size, MsgBytes: avgSize(msgs), Runs: map[string][]TimedRun{}}
		for round := range e.cfg.SweepRounds {
			for _, c := range rotate(e.cfg.withBaseline(sweepContenders), round) {
				run := e.syncOnce(ctx, c, nsSweep, msgs)
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				run.Round = round + 1
				res.Runs[c] = append(res.Runs[c], run)
				e.logRun(fmt.Sprintf("sweep %d", size), c, run)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

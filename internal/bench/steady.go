package bench

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// drainTimeout bounds the wait for the last events after a window's writes: a change that
	// has not arrived by then counts as missing.
	drainTimeout = 15 * time.Second
	// paceTick is how often the pacer releases the writes that are due; a write's latency is
	// measured from its own response, so coarse pacing shifts no latency.
	paceTick = time.Millisecond
)

// runSteady is scenario 3: at each rate, each contender in turn watches nsSteady while the
// harness writes at that rate for SteadyDuration; latency is measured per change.
func (e *Env) runSteady(ctx context.Context) ([]*Steady, error) {
	objs, _, err := e.listObjects(ctx, nsSteady)
	if err != nil {
		return nil, err
	}
	var out []*Steady
	for _, rate := range e.cfg.SteadyRates {
		st := &Steady{Rate: rate, Duration: e.cfg.SteadyDuration, Runs: map[string][]LatencyRun{}}
		out = append(out, st)
		// The ceiling publishes the steady objects' events with fresh resourceVersions, so
		// that JetStream's de-duplication does not drop the repeats.
		n := int(float64(rate) * e.cfg.SteadyDuration.Seconds())
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			o := objs[i%len(objs)].DeepCopy()
			o.SetResourceVersion(strconv.Itoa(1_000_000_000 + i))
			if msgs[i], err = message(o, namesFor(Ceiling).cluster, event.Modified, event.Live); err != nil {
				return out, err
			}
		}
		for round := range e.cfg.Rounds {
			for _, c := range rotate(e.cfg.contenders(), round) {
				runCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.RunTimeout, errRunTimeout)
				run := e.steadyOnce(runCtx, c, rate, msgs)
				cancel()
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
				run.Round = round + 1
				st.Runs[c] = append(st.Runs[c], run)
				if run.Err != "" {
					e.logf("steady %d/s round %d %-9s FAILED: %s", rate, run.Round, c, run.Err)
				} else {
					e.logf("steady %d/s round %d %-9s %d writes at %.0f/s, e2e p50 %s p99 %s, added p50 %s p99 %s, missing %d",
						rate, run.Round, c, run.Writes, run.Achieved, ms(run.E2E.P50), ms(run.E2E.P99),
						ms(run.Added.P50), ms(run.Added.P99), run.Missing)
				}
			}
		}
	}
	return out, nil
}

// steadyOnce runs one contender's window at rate.
func (e *Env) steadyOnce(ctx context.Context, contender string, rate int, msgs []*nats.Msg) (run LatencyRun) {
	fail := func(err error) LatencyRun { run.Err = err.Error(); return run }
	nm := namesFor(contender)
	var proc *child
	if contender != RawWatch {
		if err := e.freshStream(ctx, nm); err != nil {
			return fail(err)
		}
		defer e.dropStream(context.WithoutCancel(ctx), nm)
	}
	if publishesFromKube(contender) {
		var err error
		if proc, err = e.startContender(contender, nm, nsSteady, "publish"); err != nil {
			return fail(err)
		}
		defer func() { _, _ = proc.stop() }()
		if err := waitReady(ctx, proc); err != nil {
			return fail(err)
		}
		if _, err := e.waitStream(ctx, nm.stream, uint64(e.cfg.SteadyObjects), proc.failed); err != nil {
			return fail(err)
		}
		if isRelay(contender) {
			if _, err := e.waitCheckpoint(ctx, nm, nsSteady, "", proc.failed); err != nil {
				return fail(err)
			}
		}
	}
	var consumed, watched *receipts
	if contender != RawWatch {
		r, stop, err := e.consume(ctx, nm.stream)
		if err != nil {
			return fail(err)
		}
		defer stop()
		consumed = r
	}
	if contender != Ceiling {
		r, stop, err := e.watchReceipts(ctx)
		if err != nil {
			return fail(err)
		}
		defer stop()
		watched = r
	}

	// The relay's own latency comes from its metrics; a failed scrape loses only that
	// column (logged), not the round.
	var addr string
	var lag0 histogram
	if isRelay(contender) {
		var err error
		if addr, err = proc.httpAddr(); err == nil {
			lag0, err = scrapeLag(ctx, addr)
		}
		if err != nil {
			e.logf("steady %d/s: relay metrics: %v", rate, err)
			addr = ""
		}
	}
	m := e.meter()
	var cpu0 float64
	if proc != nil {
		cpu0 = proc.cpu()
	}
	var writes []change
	var err error
	if contender == Ceiling {
		writes, err = e.paceCeiling(ctx, rate, msgs)
	} else {
		writes, err = e.paceWrites(ctx, rate)
	}
	if err != nil {
		return fail(err)
	}
	took := time.Since(m.start)
	final := consumed
	if contender == RawWatch {
		final = watched
	}
	final.waitFor(ctx, writes, drainTimeout)
	run.ServerCPU, run.Window = m.servers(), time.Since(m.start)
	if addr != "" {
		if lag1, err := scrapeLag(ctx, addr); err != nil {
			e.logf("steady %d/s: relay metrics: %v", rate, err)
		} else {
			run.Own = ownLatency(lag0, lag1)
		}
	}
	if proc != nil {
		run.CPU = proc.cpu() - cpu0
	}
	run.Writes, run.Achieved = len(writes), float64(len(writes))/took.Seconds()
	var e2e, added []time.Duration
	for _, w := range writes {
		got, ok := final.get(w.key())
		if !ok {
			run.Missing++
			continue
		}
		run.Received++
		e2e = append(e2e, got.Sub(w.at))
		if publishesFromKube(contender) {
			if saw, ok := watched.get(w.key()); ok {
				added = append(added, got.Sub(saw))
			}
		}
	}
	run.E2E, run.Added = percentiles(e2e), percentiles(added)
	if proc != nil {
		if err := proc.failed(); err != nil {
			run.Err = err.Error()
		}
	}
	return run
}

// receipts records when each change (name/resourceVersion) arrived.
type receipts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newReceipts() *receipts { return &receipts{at: make(map[string]time.Time)} }

func (r *receipts) record(key string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.at[key]; !dup {
		r.at[key] = t
	}
}

func (r *receipts) get(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[key]
	return t, ok
}

// waitFor waits until every change has arrived, or timeout.
func (r *receipts) waitFor(ctx context.Context, changes []change, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for i := 0; i < len(changes); {
		if _, ok := r.get(changes[i].key()); ok {
			i++
			continue
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(pollInterval)
	}
}

// consume reads the stream's new messages with an ordered consumer on a connection of its
// own and records each message's receipt by its k8s-name and k8s-resourceversion headers.
func (e *Env) consume(ctx context.Context, stream string) (*receipts, func(), error) {
	nc, err := nats.Connect(e.test.NATS.URL())
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	r := newReceipts()
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		now := time.Now()
		h := msg.Headers()
		r.record(h.Get(event.HeaderName)+"/"+h.Get(event.HeaderResourceVersion), now)
	})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return r, func() { cc.Stop(); nc.Close() }, nil
}

// watchReceipts is the raw watch of the steady scenario, the reference the relay's added
// latency is measured against: a typed client-go watch of nsSteady from now on (protobuf,
// the cheapest a client can read), recording each change's receipt.
func (e *Env) watchReceipts(ctx context.Context) (*receipts, func(), error) {
	cms := e.watchKube.CoreV1().ConfigMaps(nsSteady)
	list, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, nil, err
	}
	r := newReceipts()
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				r.record(cm.Name+"/"+cm.ResourceVersion, now)
			}
		}
	}()
	return r, w.Stop, nil
}

// paceWrites updates the steady objects round-robin at rate for SteadyDuration with
// Config.Writers writers and returns the changes. When the cluster cannot keep up, the
// schedule slips (a write waits for a free writer) and fewer writes happen in the window:
// the achieved rate is reported, never the intended one.
func (e *Env) paceWrites(ctx context.Context, rate int) ([]change, error) {
	n := int(float64(rate) * e.cfg.SteadyDuration.Seconds())
	due := make(chan int) // unbuffered: a write is issued only when a writer is free
	changes := make([]change, n)
	errs := make(chan error, e.cfg.Writers)
	var wg sync.WaitGroup
	for range e.cfg.Writers {
		wg.Go(func() {
			for i := range due {
				c, err := e.updateOne(ctx, nsSteady, objectName(i%e.cfg.SteadyObjects), e.writeValue())
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				changes[i] = c
			}
		})
	}
	issued := pace(ctx, rate, n, e.cfg.SteadyDuration, func(i int) {
		select {
		case due <- i:
		case <-ctx.Done():
		}
	})
	close(due)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return changes[:issued], ctx.Err()
}

// paceCeiling publishes msgs asynchronously at rate; a change's time is its publish call.
func (e *Env) paceCeiling(ctx context.Context, rate int, msgs []*nats.Msg) ([]change, error) {
	nc, err := nats.Connect(e.test.NATS.URL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(ceilingWindow))
	if err != nil {
		return nil, err
	}
	changes := make([]change, len(msgs))
	var pubErr error
	issued := pace(ctx, rate, len(msgs), e.cfg.SteadyDuration, func(i int) {
		h := msgs[i].Header
		changes[i] = change{name: h.Get(event.HeaderName), rv: h.Get(event.HeaderResourceVersion), at: time.Now()}
		if _, err := js.PublishMsgAsync(msgs[i], jetstream.WithStallWait(ceilingStallWait)); err != nil && pubErr == nil {
			pubErr = err
		}
	})
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
	}
	return changes[:issued], pubErr
}

// pace calls do(i) for i in 0..n-1, each no earlier than i/rate seconds after the start,
// until n calls or the duration has passed, and returns the number of calls. A do that
// blocks delays the later ones.
func pace(ctx context.Context, rate, n int, d time.Duration, do func(i int)) int {
	start := time.Now()
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	i := 0
	for i < n {
		elapsed := time.Since(start)
		if elapsed >= d {
			break
		}
		dueNow := min(int(elapsed.Seconds()*float64(rate))+1, n)
		for ; i < dueNow && time.Since(start) < d; i++ {
			do(i)
		}
		select {
		case <-ctx.Done():
			return i
		case <-tick.C:
		}
	}
	return i
}

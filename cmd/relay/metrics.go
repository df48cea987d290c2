package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// metricsNamespace prefixes every metric name.
const metricsNamespace = "kube_nats_relay"

// Histogram buckets, in seconds.
var (
	// publishBuckets span a local server's sub-millisecond ack to a JetStream leader election
	// (publishAsyncTimeout is 10s): 0.5ms to about 16s, doubling.
	publishBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)
	// lagBuckets span a live change relayed at once to one held back by a NATS outage or a
	// full buffer: 0.25ms to 2 minutes. They are finer around a few milliseconds, where a
	// healthy relay's own latency lies, so that a p99 against a 5 ms objective can be read.
	lagBuckets = []float64{0.00025, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05,
		0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
)

// metrics is the relay's Prometheus registry. Labels come from the configuration only
// (resource, watched_namespace) or from small fixed sets (type, origin, by): never from object names,
// so the number of series is bounded by what the relay is configured to watch.
type metrics struct {
	reg *prometheus.Registry

	published       *prometheus.CounterVec
	oversize        *prometheus.CounterVec
	publishErrors   *prometheus.CounterVec
	publishRetries  *prometheus.CounterVec
	publishDuration *prometheus.HistogramVec
	lag             *prometheus.HistogramVec
	lists           *prometheus.CounterVec
	expired         *prometheus.CounterVec
	ahead           *prometheus.CounterVec
	replays         *prometheus.CounterVec
	streamReads     *prometheus.CounterVec
	listFallbacks   *prometheus.CounterVec
	filtered        *prometheus.CounterVec
	filterErrors    *prometheus.CounterVec
	undeliverable   *prometheus.CounterVec
	leader          prometheus.Gauge

	// sampled is read at scrape time: sources, checkpoint ages, the NATS connection.
	sampled sampledCollector
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	m.published = counter("events_published_total",
		"Events acknowledged by JetStream as new, by resource, event type and origin (live, initial-sync, relist).",
		"resource", "type", "origin")
	m.oversize = counter("events_oversize_total",
		"Events published without body because the object exceeded the server's max_payload or the stream's max_msg_size.", "resource")
	m.publishErrors = counter("publish_errors_total",
		"Failed publish attempts (events, index records, mirror states); transient ones are retried in order, refused ones are sent without body or given up (undeliverable_total).", "resource")
	m.publishRetries = counter("publish_retries_total",
		"Publishes sent again after a failure.", "resource")
	m.publishDuration = histogram("publish_duration_seconds",
		"Time from handing an event to the NATS client to its JetStream ack.", publishBuckets, "resource")
	m.lag = histogram("pipeline_lag_seconds",
		"Time from receiving a change (watch event or list page) to its JetStream ack, buffering and retries included.", lagBuckets, "resource")
	m.lists = counter("lists_total",
		"Completed lists: the first one without a checkpoint (initial-sync) and relists after a 410 (relist).", "resource", "origin")
	m.expired = counter("resource_version_expired_total",
		"Watches or lists answered 410 Gone: the resourceVersion left the apiserver's history and a relist follows.", "resource")
	m.ahead = counter("resource_version_ahead_total",
		"Resumes whose resourceVersion (checkpoint, object index or last seen) was ahead of the cluster's, or answered 'too large resource version': etcd was restored or the cluster rebuilt under the same name; a relist follows.", "resource")
	m.replays = counter("replays_suppressed_total",
		"Replayed changes kept out: by the object index (never published again), by the stream (a delete the relist would infer, or a derived event, that the stream holds already) or by the JetStream duplicate window (published, dropped by the server as a repeat).",
		"resource", "by")
	m.streamReads = counter("stream_reads_total",
		"Synchronous reads of the stream's last message on an object's subjects, by purpose: derived (before a derived event of a change a previous run may have published, at or below the replay horizon, or a state condition's first rise of an object last recorded at or below it) and delete (before a delete the relist would infer).",
		"resource", "purpose")
	m.listFallbacks = counter("watch_list_fallbacks_total",
		"Sources that gave up the streaming list (RELAY_WATCH_LIST=auto) and read every object page by page for the rest of the run: the server refused sendInitialEvents, answered it as a plain watch, or ended three streams in a row before their initial-events-end bookmark. Restarting the relay tries streaming again.",
		"resource")
	m.filtered = counter("changes_filtered_total",
		"Changes the rules kept out, by reason: namespace (not selected), event-type, when (the expression returned false), quiet (only quiet fields changed).",
		"resource", "reason")
	m.filterErrors = counter("filter_errors_total",
		"When expressions that failed to evaluate; the change is published and the first error of each rule is logged.", "resource")
	m.undeliverable = counter("undeliverable_total",
		"Changes NATS refused for good, by step (mirror, event, index) and reason (too-large, denied, subject-full, subject-too-long, bad-subject, rejected): given up, logged at ERROR, and the relay moved on.",
		"resource", "step", "reason")
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "leader",
		Help: "1 while this process relays (holds the lease, or runs without leader election), 0 while it stands by."})
	m.reg.MustRegister(m.published, m.oversize, m.publishErrors, m.publishRetries, m.publishDuration, m.lag,
		m.lists, m.expired, m.ahead, m.replays, m.streamReads, m.listFallbacks, m.filtered, m.filterErrors, m.undeliverable, m.leader, &m.sampled,
		buildInfo(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// sourceObserver reports one source's events to the metrics, under its resource label.
type sourceObserver struct {
	m        *metrics
	resource string
}

var (
	_ relay.Observer            = sourceObserver{}
	_ relay.UndeliveredObserver = sourceObserver{}
)

func (o sourceObserver) Published(p relay.Publication) {
	if p.Duplicate {
		o.m.replays.WithLabelValues(o.resource, "dedup").Inc()
	} else {
		o.m.published.WithLabelValues(o.resource, string(p.Type), string(p.Origin)).Inc()
		if p.Oversize {
			o.m.oversize.WithLabelValues(o.resource).Inc()
		}
	}
	o.m.publishDuration.WithLabelValues(o.resource).Observe(p.RTT.Seconds())
	if p.Lag > 0 {
		o.m.lag.WithLabelValues(o.resource).Observe(p.Lag.Seconds())
	}
}

func (o sourceObserver) Undelivered(u relay.Undelivered) {
	o.m.undeliverable.WithLabelValues(o.resource, string(u.Step), string(u.Reason)).Inc()
}

func (o sourceObserver) Noted(n relay.Note) {
	switch n {
	case relay.NotePublishFailed:
		o.m.publishErrors.WithLabelValues(o.resource).Inc()
	case relay.NotePublishRetried:
		o.m.publishRetries.WithLabelValues(o.resource).Inc()
	case relay.NoteInitialSync:
		o.m.lists.WithLabelValues(o.resource, "initial-sync").Inc()
	case relay.NoteRelist:
		o.m.lists.WithLabelValues(o.resource, "relist").Inc()
	case relay.NoteExpired:
		o.m.expired.WithLabelValues(o.resource).Inc()
	case relay.NoteAhead:
		o.m.ahead.WithLabelValues(o.resource).Inc()
	case relay.NoteReplaySuppressed:
		o.m.replays.WithLabelValues(o.resource, "index").Inc()
	case relay.NoteDeletePublished, relay.NoteDerivedPublished:
		o.m.replays.WithLabelValues(o.resource, "stream").Inc()
	case relay.NoteStreamReadDerived:
		o.m.streamReads.WithLabelValues(o.resource, "derived").Inc()
	case relay.NoteStreamReadDelete:
		o.m.streamReads.WithLabelValues(o.resource, "delete").Inc()
	case relay.NoteWatchListFallback:
		o.m.listFallbacks.WithLabelValues(o.resource).Inc()
	case relay.NoteFilteredNamespace:
		o.m.filtered.WithLabelValues(o.resource, "namespace").Inc()
	case relay.NoteFilteredEventType:
		o.m.filtered.WithLabelValues(o.resource, "event-type").Inc()
	case relay.NoteFilteredWhen:
		o.m.filtered.WithLabelValues(o.resource, "when").Inc()
	case relay.NoteFilteredQuiet:
		o.m.filtered.WithLabelValues(o.resource, "quiet").Inc()
	case relay.NoteFilterError:
		o.m.filterErrors.WithLabelValues(o.resource).Inc()
	}
}

// sourceObserver returns the observer that counts the events and notes of resource r's
// sources.
func (m *metrics) sourceObserver(r relay.Resource) relay.Observer {
	return sourceObserver{m: m, resource: r.GroupResource().String()}
}

// observe attaches the metrics to every source and samples them, their checkpoints and the
// NATS connection at scrape time.
func (m *metrics) observe(sources []*relay.Source, ckpts *trackedCheckpoints, nc *nats.Conn) {
	for _, s := range sources {
		r, _ := s.Resource()
		res := r.GroupResource().String()
		// Every series of the resource exists from the start, at 0, so that rate() and
		// alerts see a first failure or relist as an increase, not as a new series.
		for _, t := range []string{"added", "modified", "deleted"} {
			for _, o := range []string{"live", "initial-sync", "relist"} {
				m.published.WithLabelValues(res, t, o)
			}
		}
		for _, o := range []string{"initial-sync", "relist"} {
			m.lists.WithLabelValues(res, o)
		}
		for _, by := range []string{"index", "dedup"} {
			m.replays.WithLabelValues(res, by)
		}
		for _, purpose := range []string{"derived", "delete"} {
			m.streamReads.WithLabelValues(res, purpose)
		}
		for _, reason := range []string{"namespace", "event-type", "when", "quiet"} {
			m.filtered.WithLabelValues(res, reason)
		}
		m.filterErrors.WithLabelValues(res)
		m.listFallbacks.WithLabelValues(res)
		for _, step := range relay.Steps {
			for _, why := range relay.Refusals {
				m.undeliverable.WithLabelValues(res, string(step), string(why))
			}
		}
		m.oversize.WithLabelValues(res)
		m.publishErrors.WithLabelValues(res)
		m.publishRetries.WithLabelValues(res)
		m.expired.WithLabelValues(res)
		m.ahead.WithLabelValues(res)
	}
	m.sampled.state.Store(&sampledState{sources: sources, ckpts: ckpts, nc: nc})
}

// sourceLabels label the series of one source: its resource and the namespace it watches
// (empty for all namespaces). Not "namespace": the Prometheus Operator gives every scraped
// series the namespace of the pod it scraped, and would rename ours exported_namespace.
var sourceLabels = []string{"resource", "watched_namespace"}

var (
	bufferUsedDesc = prometheus.NewDesc(metricsNamespace+"_buffer_used",
		"Changes waiting in the buffer between watch intake and publishing.", sourceLabels, nil)
	bufferCapacityDesc = prometheus.NewDesc(metricsNamespace+"_buffer_capacity",
		"Capacity of the buffer between watch intake and publishing (RELAY_BUFFER_SIZE).", sourceLabels, nil)
	checkpointAgeDesc = prometheus.NewDesc(metricsNamespace+"_checkpoint_age_seconds",
		"Seconds since this process last saved the resource's checkpoint (or loaded it, before its first save). A restart resumes from the checkpoint: beyond the apiserver's history (5-10 minutes) it relists.",
		sourceLabels, nil)
	checkpointTimestampDesc = prometheus.NewDesc(metricsNamespace+"_checkpoint_timestamp_seconds",
		"Unix time at which this process last saved the resource's checkpoint (or loaded it, before its first save): time() minus it is the checkpoint's age.",
		sourceLabels, nil)
	sourceReadyDesc = prometheus.NewDesc(metricsNamespace+"_resource_watching",
		"1 while the resource is watched, 0 while it lists, re-opens its watch, or the server refuses it.", sourceLabels, nil)
	natsConnectedDesc = prometheus.NewDesc(metricsNamespace+"_nats_connected",
		"1 while the NATS connection is up, 0 while it is connecting, reconnecting or closed.", nil, nil)
	natsReconnectsDesc = prometheus.NewDesc(metricsNamespace+"_nats_reconnects_total",
		"Reconnections of the NATS connection.", nil, nil)
)

// sampledCollector reports values read at scrape time.
type sampledCollector struct {
	state atomic.Pointer[sampledState]
}

type sampledState struct {
	sources []*relay.Source
	ckpts   *trackedCheckpoints
	nc      *nats.Conn
}

func (c *sampledCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bufferUsedDesc, bufferCapacityDesc, checkpointAgeDesc, checkpointTimestampDesc, sourceReadyDesc, natsConnectedDesc, natsReconnectsDesc} {
		ch <- d
	}
}

func (c *sampledCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state.Load()
	if st == nil {
		return
	}
	connected := 0.0
	if st.nc.IsConnected() {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(natsConnectedDesc, prometheus.GaugeValue, connected)
	ch <- prometheus.MustNewConstMetric(natsReconnectsDesc, prometheus.CounterValue, float64(st.nc.Stats().Reconnects))
	now := time.Now()
	for _, s := range st.sources {
		r, ns := s.Resource()
		res := r.GroupResource().String()
		used, capacity := s.BufferFill()
		if capacity > 0 { // the source runs
			ch <- prometheus.MustNewConstMetric(bufferUsedDesc, prometheus.GaugeValue, float64(used), res, ns)
			ch <- prometheus.MustNewConstMetric(bufferCapacityDesc, prometheus.GaugeValue, float64(capacity), res, ns)
			watching, _ := s.Status()
			ch <- prometheus.MustNewConstMetric(sourceReadyDesc, prometheus.GaugeValue, boolValue(watching), res, ns)
		}
		if at, ok := st.ckpts.savedAt(s.Key()); ok {
			ch <- prometheus.MustNewConstMetric(checkpointAgeDesc, prometheus.GaugeValue, now.Sub(at).Seconds(), res, ns)
			ch <- prometheus.MustNewConstMetric(checkpointTimestampDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9, res, ns)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// trackedCheckpoints records when each checkpoint was last loaded or saved, for the age and
// timestamp metrics, and reports conflicts (a checkpoint written by another process) to onConflict.
type trackedCheckpoints struct {
	relay.Checkpointer
	onConflict func(error)

	mu    sync.Mutex
	saved map[string]time.Time
}

func newTrackedCheckpoints(c relay.Checkpointer) *trackedCheckpoints {
	return &trackedCheckpoints{Checkpointer: c, saved: make(map[string]time.Time)}
}

func (t *trackedCheckpoints) Load(ctx context.Context, key string) (string, bool, error) {
	rv, ok, err := t.Checkpointer.Load(ctx, key)
	if err == nil {
		t.mark(key)
	}
	return rv, ok, err
}

func (t *trackedCheckpoints) Save(ctx context.Context, key, rv string) error {
	err := t.Checkpointer.Save(ctx, key, rv)
	var conflict relay.ConflictError
	switch {
	case err == nil:
		t.mark(key)
	case errors.As(err, &conflict) && conflict.Conflict() && t.onConflict != nil:
		t.onConflict(err)
	}
	return err
}

func (t *trackedCheckpoints) mark(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.saved[key] = time.Now()
}

func (t *trackedCheckpoints) savedAt(key string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.saved[key]
	return at, ok
}

package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// publishStuckAfter is how long publishing may keep failing before the source reports not
// ready: longer than a NATS leader election or restart.
const publishStuckAfter = 30 * time.Second

// publishRetryLogEvery is how many retries of one change pass between warnings about it.
const publishRetryLogEvery = 10

// Checkpointer loads and saves the resourceVersion a source resumes from.
type Checkpointer interface {
	// Load returns the saved resourceVersion, or ok=false when there is none.
	Load(ctx context.Context, key string) (rv string, ok bool, err error)
	// Save records rv for key.
	Save(ctx context.Context, key, rv string) error
}

// ObjectIndex is the durable record, per source, of the last change published for each
// object (namespace/name): it keeps replays out after restarts and is what a relist is diffed
// against.
type ObjectIndex interface {
	// Load calls fn for every object recorded under source.
	Load(ctx context.Context, source string, fn func(object, uid, rv string)) error
	// Record returns the message recording object's change (uid at rv), or its removal
	// when uid is empty; the pipeline publishes it after the event's ack.
	Record(source, object, uid, rv string) *nats.Msg
}

// StateMirror keeps the current state of every object of a mirrored resource.
type StateMirror interface {
	// Record returns the message setting the object's state to body (nil: the object is
	// gone); the pipeline publishes it before the event.
	Record(meta event.Meta, body []byte) *nats.Msg
}

// Resource is a resolved API resource.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// String writes the resource as kubectl does: resource.version.group, or resource.version
// for the core group.
func (r Resource) String() string {
	s := r.Resource + "." + r.Version
	if r.Group != "" {
		s += "." + r.Group
	}
	return s
}

// SourceConfig is what one source watches and where it publishes.
type SourceConfig struct {
	// Cluster and Prefix name the subjects: <Prefix>.<Cluster>.<group>...
	Cluster, Prefix string
	Resource        Resource
	// Namespace limits a namespaced resource to one namespace; "" watches all.
	Namespace string
	// LabelSelector and FieldSelector are applied by the apiserver.
	LabelSelector, FieldSelector string
	// InitialSync publishes every existing object once when there is no checkpoint; when
	// false the first start only records where to watch from.
	InitialSync bool
	// Buffer is the capacity of the intake buffer; MaxInflight bounds changes taken from it
	// and not yet acked.
	Buffer, MaxInflight int
	// CheckpointInterval is the most often a moving checkpoint is written (bookmarks and the
	// end of a list are written at once).
	CheckpointInterval time.Duration
	// MaxPayload is the NATS server's max_payload: larger messages go out without body.
	MaxPayload int
	// ShutdownTimeout bounds the wait for in-flight acks and the final checkpoint.
	ShutdownTimeout time.Duration
	// Redacted lists, comma-separated, the field paths the rules redact; it is sent as the
	// k8s-redacted header of every event that has a body.
	Redacted string
}

// Source relays one resource (in one namespace, or all) to JetStream.
type Source struct {
	cfg    SourceConfig
	client reader
	pub    Publisher
	ckpt   Checkpointer
	objIdx ObjectIndex
	mirror StateMirror
	obs    Observer
	key    string
	index  *index
	now    func() time.Time
	// rules filter and shape changes; nsRules and namespaces select by namespace on the
	// client side (nil: every namespace).
	rules      Rules
	nsRules    NamespaceRules
	namespaces *Namespaces
	// nsClient reads one namespace of the resource, for catching up on a namespace that
	// becomes selected.
	nsClient func(ns string) reader
	// published, when set, is read before an inferred delete (see deletePublished).
	published PublishedLog

	// pipe is the running pipeline, for status.
	pipe atomic.Pointer[pipeline]
	// synced is set while the source watches (after its first list, or on resuming).
	synced atomic.Bool
	// failure holds the error that stopped the source.
	failure atomic.Pointer[error]
	// watchErr holds the permanent error (forbidden, resource gone) the source keeps
	// retrying, nil while it is not failing.
	watchErr atomic.Pointer[error]
	// denials fails publishes refused by a permissions violation; undelivered records the
	// changes given up on.
	denials     *Denials
	undelivered undeliveredLog
	// budget bounds the bytes of list pages and changes held (nil: no bound); shared.
	budget *Budget
	// hist keeps the history epoch (see HistoryKeeper); history is the epoch, historyAt the
	// checkpoint it began at.
	hist      HistoryKeeper
	history   atomic.Uint64
	historyAt string
}

// Status reports whether the source is watching, or why not.
func (s *Source) Status() (ready bool, reason string) {
	if err := s.failure.Load(); err != nil {
		return false, s.describe() + ": " + (*err).Error()
	}
	if err := s.watchErr.Load(); err != nil {
		return false, s.describe() + ": " + (*err).Error()
	}
	if !s.synced.Load() {
		if s.namespaces != nil {
			if why := s.namespaces.waiting(); why != "" {
				return false, s.describe() + ": " + why
			}
		}
		return false, s.describe() + ": not watching (listing, or re-opening its watch)"
	}
	if p := s.pipe.Load(); p != nil {
		if since, err := p.failing(); err != nil && time.Since(since) > publishStuckAfter {
			return false, fmt.Sprintf("%s: publishing failing since %s: %v", s.describe(), since.Format(time.RFC3339), err)
		}
	}
	if why := s.undelivered.reason(time.Now()); why != "" {
		return false, s.describe() + ": " + why
	}
	return true, ""
}

// NewSource returns a source that reads through client (a dynamic client for the resource),
// publishes with pub, checkpoints with ckpt and records what it published in objIdx (nil
// keeps the index in memory only, so a restart cannot diff a relist against it).
func NewSource(cfg SourceConfig, client dynamic.Interface, pub Publisher, ckpt Checkpointer, objIdx ObjectIndex) *Source {
	ri := client.Resource(cfg.Resource.GroupVersionResource)
	var rc dynamic.ResourceInterface = ri
	if cfg.Resource.Namespaced && cfg.Namespace != "" {
		rc = ri.Namespace(cfg.Namespace)
	}
	return &Source{cfg: cfg, client: dynamicReader{rc}, pub: pub, ckpt: ckpt, objIdx: objIdx, key: CheckpointKey(cfg), index: newIndex(), now: time.Now,
		rules: defaultRules{}, nsClient: func(ns string) reader { return dynamicReader{ri.Namespace(ns)} }}
}

// ReadThrough makes the source list and watch through r, which decodes responses in one pass,
// instead of the dynamic client it was created with; when the source's rules publish objects
// as read (AsReadRules), it does not decode their bodies at all.
func (s *Source) ReadThrough(r *RawReaders) error {
	gvr := s.cfg.Resource.GroupVersionResource
	ns := ""
	if s.cfg.Resource.Namespaced {
		ns = s.cfg.Namespace
	}
	rd, err := r.reader(gvr, ns)
	if err != nil {
		return err
	}
	rd.budget = s.budget
	s.client = rd
	s.nsClient = func(ns string) reader {
		return &rawReader{client: rd.client, gvr: gvr, ns: ns, asRead: rd.asRead, budget: s.budget}
	}
	s.readMode()
	return nil
}

// WithBudget makes the source hold its list pages and its changes between reading and ack
// within b, which other sources may share (nil: bounded by counts only). Only list pages read
// through RawReaders (ReadThrough) are sized and counted; changes always are.
func (s *Source) WithBudget(b *Budget) *Source {
	s.budget = b
	if rd, ok := s.client.(*rawReader); ok {
		rd.budget = b
	}
	return s
}

// WithRules makes the source filter and shape changes with r.
func (s *Source) WithRules(r Rules) *Source {
	s.rules = r
	s.readMode()
	return s
}

// readMode makes a source that reads through RawReaders read objects as is when its rules
// allow it (see AsReadRules): their bodies are then published without being decoded.
func (s *Source) readMode() {
	if rd, ok := s.client.(*rawReader); ok {
		rd.asRead = asReadOf(s.rules)
	}
}

// WithNamespaceRules makes the source relay only objects whose namespace nr selects; ns
// supplies namespace labels and must be running (nil when nr does not look at labels).
func (s *Source) WithNamespaceRules(nr NamespaceRules, ns *Namespaces) *Source {
	s.nsRules, s.namespaces = nr, ns
	return s
}

// WithMirror makes the source keep the state mirror m up to date (before each event).
func (s *Source) WithMirror(m StateMirror) *Source {
	s.mirror = m
	return s
}

// CheckpointKey names a source's checkpoint: cluster, group, resource, namespace and, when
// selectors are set, a hash of them, so that changing what is selected starts afresh instead
// of resuming a history that never included the newly selected objects. The version is left
// out: resourceVersions do not depend on it.
func CheckpointKey(cfg SourceConfig) string {
	group := cfg.Resource.Group
	if group == "" {
		group = "core"
	}
	ns := "_all"
	if cfg.Resource.Namespaced && cfg.Namespace != "" {
		ns = cfg.Namespace
	}
	parts := []string{cfg.Cluster, group, cfg.Resource.Resource, ns}
	if cfg.LabelSelector != "" || cfg.FieldSelector != "" {
		h := sha256.Sum256([]byte(cfg.LabelSelector + "\x00" + cfg.FieldSelector))
		parts = append(parts, "sel-"+hex.EncodeToString(h[:6]))
	}
	return strings.Join(parts, ".")
}

// Key is the source's checkpoint key.
func (s *Source) Key() string { return s.key }

func (s *Source) describe() string {
	d := s.cfg.Resource.String()
	if s.cfg.Resource.Namespaced && s.cfg.Namespace != "" {
		d += " in namespace " + s.cfg.Namespace
	}
	return d
}

// Run relays until ctx ends, then stops intake, waits for in-flight acks (at most
// ShutdownTimeout), writes the final checkpoint and returns nil. It returns early with an
// error wrapping ErrPermanent when the resource cannot be watched (forbidden, gone).
func (s *Source) Run(ctx context.Context) error {
	lc := zerolog.Ctx(ctx).With().Str("resource", s.cfg.Resource.String())
	if s.cfg.Namespace != "" {
		lc = lc.Str("namespace", s.cfg.Namespace)
	}
	log := lc.Logger()
	ctx = log.WithContext(ctx)

	rv, err := s.load(ctx, log)
	if err != nil {
		return nil // ctx ended while loading
	}

	// srcCtx ends with ctx, or when the checkpoint turns out to be written by someone else.
	srcCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	cp := newCheckpointSaver(s.ckpt, s.key, rv, s.cfg.CheckpointInterval)
	cp.fail = fail
	p := newPipeline(s.pub, s.cfg.Buffer, s.cfg.MaxInflight, cp.advance, func(it *item, err error) {
		// The first failure of a change and every tenth retry are warnings; the rest are
		// debug lines, so that an outage of minutes does not flood the log.
		ev := log.Debug()
		if it.attempts == 1 || it.attempts%publishRetryLogEvery == 0 {
			ev = log.Warn()
		}
		ev.Err(err).Str("subject", it.current().Subject).Int("attempt", it.attempts).Msg("publish failed, retrying")
	})
	p.obs = s.obs
	p.onRefused, p.denials = s.onRefused(log), s.denials
	p.budget = s.budget
	s.pipe.Store(p)
	in := &intake{src: s, out: p.in, index: s.index, log: log, cp: cp}

	// Shutdown: intake ends with srcCtx; the pipeline then stops taking items and waits for
	// what is in flight until the drain deadline (shutdown timeout less the final save's
	// share, counted from when intake stopped); the saver writes last, with its own budget.
	finalSave := min(finalSaveBudget, s.cfg.ShutdownTimeout/4)
	drainBudget := s.cfg.ShutdownTimeout - finalSave
	stop := make(chan struct{})
	pipelineDone := make(chan struct{})
	drainCtx, cancelDrain := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDrain()
	var g errgroup.Group
	g.Go(func() error {
		in.run(srcCtx, rv)
		close(stop)
		return nil
	})
	g.Go(func() error {
		<-stop
		deadline := time.NewTimer(drainBudget)
		defer deadline.Stop()
		select {
		case <-deadline.C:
			log.Warn().Stringer("after", drainBudget).Msg("shutdown: publishes still unacknowledged, giving up on them")
			cancelDrain()
		case <-pipelineDone:
		}
		return nil
	})
	g.Go(func() error {
		_ = p.run(drainCtx, stop)
		close(pipelineDone)
		return nil
	})
	g.Go(func() error { return cp.run(srcCtx, context.WithoutCancel(ctx), pipelineDone, finalSave, fail, log) })
	_ = g.Wait()
	p.releaseBuffered()
	if cause := context.Cause(srcCtx); cause != nil && ctx.Err() == nil {
		err := fmt.Errorf("%w: %s: %w", ErrPermanent, s.describe(), cause)
		s.failure.Store(&err)
		return err
	}
	return nil
}

// load reads the checkpoint and the object index, retrying until ctx ends (NATS may be
// electing a leader or restarting). It returns the resourceVersion to resume from, empty
// without a checkpoint.
func (s *Source) load(ctx context.Context, log zerolog.Logger) (string, error) {
	for failures := 1; ; failures++ {
		rv, err := s.loadOnce(ctx, log)
		if err == nil || ctx.Err() != nil {
			return rv, err
		}
		wait := watchBackoff(failures)
		log.Warn().Err(err).Stringer("retry_in", wait).Msg("loading checkpoint and index failed, retrying")
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (s *Source) loadOnce(ctx context.Context, log zerolog.Logger) (string, error) {
	rv, ok, err := s.ckpt.Load(ctx, s.key)
	if err != nil {
		return "", fmt.Errorf("load checkpoint %q: %w", s.key, err)
	}
	if !ok {
		rv = ""
	}
	if err := s.loadHistory(ctx); err != nil {
		return "", err
	}
	if s.objIdx != nil {
		start := time.Now()
		loaded := newIndex()
		if err := s.objIdx.Load(ctx, s.key, func(object, uid, rv string) {
			loaded.put(object, entry{UID: uid, ResourceVersion: rv})
		}); err != nil {
			return "", fmt.Errorf("load object index %q: %w", s.key, err)
		}
		s.index = loaded
		log.Info().Int("objects", s.index.len()).Stringer("took", time.Since(start).Round(time.Millisecond)).Msg("object index loaded")
	}
	return rv, nil
}

// meta is the identity of a change of obj, read before the rules shape it.
func (s *Source) meta(obj *unstructured.Unstructured, t event.Type, origin event.Origin) event.Meta {
	return event.Meta{
		Cluster:         s.cfg.Cluster,
		Group:           s.cfg.Resource.Group,
		Version:         s.cfg.Resource.Version,
		Resource:        s.cfg.Resource.Resource,
		Kind:            s.cfg.Resource.Kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             string(obj.GetUID()),
		ResourceVersion: obj.GetResourceVersion(),
		Type:            t,
		Origin:          origin,
		Time:            s.now(),
		History:         s.history.Load(),
	}
}

// message builds the JetStream message for a change (shaped is the object as published, old
// its previous shaped state or nil; body, when not nil, is the object's JSON read as is and
// published instead of encoding shaped), and the state mirror's record of it when the source is
// mirrored.
func (s *Source) message(meta event.Meta, shaped, old map[string]any, body []byte, marks eventMarks) (msg, mirror *nats.Msg, omitted bool) {
	msg = &nats.Msg{Subject: meta.Subject(s.cfg.Prefix).String(), Header: meta.Header()}
	if marks.finalStateUnknown {
		msg.Header.Set(event.HeaderFinalStateUnknown, "true")
	}
	if marks.leftSelection {
		msg.Header.Set(event.HeaderLeftSelection, "true")
	}
	var payload string
	var err error
	if body == nil {
		body, payload, err = s.rules.Body(shaped, old)
	}
	if err == nil {
		// The headers that go with the body count toward the size limit.
		if payload != "" {
			msg.Header.Set(event.HeaderPayload, payload)
		}
		if s.cfg.Redacted != "" {
			msg.Header.Set(event.HeaderRedacted, event.EncodeHeaderValue(s.cfg.Redacted))
		}
	}
	switch {
	case err != nil:
		// An object decoded from JSON always encodes again; keep the event without body.
		msg.Header.Set(event.HeaderBodyOmitted, event.EncodeHeaderValue("encode: "+err.Error()))
		omitted = true
	case s.cfg.MaxPayload > 0 && len(body)+event.HeaderSize(msg.Header)+len(msg.Subject) > s.cfg.MaxPayload:
		msg.Header.Del(event.HeaderPayload)
		msg.Header.Del(event.HeaderRedacted)
		msg.Header.Set(event.HeaderBodyOmitted, event.BodyOmittedOversize)
		omitted = true
	default:
		msg.Data = body
	}
	if s.mirror == nil {
		return msg, nil, omitted
	}
	switch {
	case meta.Type == event.Deleted:
		mirror = s.mirror.Record(meta, nil)
	case omitted:
		// Too large for the bucket as well: keep the object's identity, like the event.
		ref, _ := s.tombstone(metaKey(meta), entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion}).MarshalJSON()
		mirror = s.mirror.Record(meta, ref)
	case payload != "":
		// The body wraps the object with its old state or a patch: the mirror keeps only
		// the object.
		state, err := json.Marshal(shaped)
		if err != nil {
			state, _ = s.tombstone(metaKey(meta), entry{UID: meta.UID, ResourceVersion: meta.ResourceVersion}).MarshalJSON()
		}
		mirror = s.mirror.Record(meta, state)
	default:
		mirror = s.mirror.Record(meta, msg.Data)
	}
	return msg, mirror, omitted
}

// record returns the durable index record of a change, nil without a durable index.
func (s *Source) record(object, uid, rv string) *nats.Msg {
	if s.objIdx == nil {
		return nil
	}
	return s.objIdx.Record(s.key, object, uid, rv)
}

// tombstone is the body of an inferred delete: the object's last known identity.
func (s *Source) tombstone(key string, prev entry) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(s.cfg.Resource.GroupVersion().String())
	obj.SetKind(s.cfg.Resource.Kind)
	ns, name, found := strings.Cut(key, "/")
	if !found {
		ns, name = "", key
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetUID(types.UID(prev.UID))
	obj.SetResourceVersion(prev.ResourceVersion)
	return obj
}

// checkpointSaver writes the latest acked resourceVersion: at most once per interval, at once
// when asked to (bookmarks, list end), and a last time after the pipeline has drained.
type checkpointSaver struct {
	ckpt     Checkpointer
	key      string
	interval time.Duration

	mu     sync.Mutex
	latest string
	urgent chan struct{}
	saved  string
	// saveMu is held by each save and by beginHistory; fail stops the source on a conflict.
	saveMu sync.Mutex
	fail   context.CancelCauseFunc
}

// finalSaveBudget is the share of the shutdown timeout kept for writing the final checkpoint.
const finalSaveBudget = time.Second

func newCheckpointSaver(ckpt Checkpointer, key, saved string, interval time.Duration) *checkpointSaver {
	return &checkpointSaver{ckpt: ckpt, key: key, interval: interval, latest: saved, saved: saved, urgent: make(chan struct{}, 1)}
}

// advance records rv as acked; called from the pipeline goroutine, never blocks.
func (c *checkpointSaver) advance(rv string, urgent bool) {
	c.mu.Lock()
	c.latest = rv
	c.mu.Unlock()
	if urgent {
		select {
		case c.urgent <- struct{}{}:
		default:
		}
	}
}

// ConflictError is implemented by a Checkpointer's error when the checkpoint was written by
// another writer: the source stops rather than fight over it.
type ConflictError interface {
	error
	Conflict() bool
}

func (c *checkpointSaver) run(ctx, base context.Context, pipelineDone <-chan struct{}, finalBudget time.Duration, fail context.CancelCauseFunc, log zerolog.Logger) error {
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	save := func(ctx context.Context) bool {
		c.saveMu.Lock()
		defer c.saveMu.Unlock()
		c.mu.Lock()
		rv := c.latest
		c.mu.Unlock()
		if rv == c.saved || rv == "" {
			return true
		}
		if err := c.ckpt.Save(ctx, c.key, rv); err != nil {
			var conflict ConflictError
			if errors.As(err, &conflict) && conflict.Conflict() {
				log.Error().Err(err).Str("rv", rv).Msg("checkpoint written by another relay: stopping this resource")
				fail(err)
				return false
			}
			log.Warn().Err(err).Str("rv", rv).Msg("save checkpoint failed, will retry")
			return false
		}
		c.saved = rv
		log.Debug().Str("rv", rv).Msg("checkpoint saved")
		return true
	}
	for {
		select {
		case <-pipelineDone:
			fctx, cancel := context.WithTimeout(base, finalBudget)
			defer cancel()
			if save(fctx) {
				log.Info().Str("rv", c.saved).Msg("final checkpoint")
			} else {
				log.Warn().Str("rv", c.saved).Msg("final checkpoint not saved; the next start resumes from the last saved one")
			}
			return nil
		case <-tick.C:
			save(base)
		case <-c.urgent:
			save(base)
		}
	}
}

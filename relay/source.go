package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// publishRetryLogEvery is how many retries of one change pass between warnings about it.
const publishRetryLogEvery = 10

// Resource is the resolved API resource a source watches (see event.Resource, which the
// filter package's rules are compiled for too).
type Resource = event.Resource

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
	// DataSchema is the URI of the JSON schema of the resource's objects, sent as the
	// ce-dataschema header of every event whose body is the object; "" sends none.
	DataSchema string
	// WatchList is how the initial sync and relists read every object: streamed or page
	// by page (see WatchListMode); "" is DefaultWatchListMode.
	WatchList WatchListMode
}

// Source relays one resource (in one namespace, or all) to JetStream.
type Source struct {
	cfg    SourceConfig
	client reader
	pub    Publisher
	ckpt   Checkpointer
	objIdx ObjectIndex
	// journal writes the index records; set by load (nil without a durable index).
	journal IndexJournal
	mirror  StateMirror
	obs     Observer
	key     string
	index   *index
	// clock tells the time of events and times the intake's waits, the checkpoint saver's
	// ticks and the pipeline's retries (a fake one in tests).
	clock clock.WithTickerAndDelayedExecution
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
	// since records from when the index knows each state condition (see ruleSince); nil
	// without a StateNamer's rules or a durable index: every entry knows them all.
	since ruleSince
	// sinceNewest is since's highest resourceVersion ("" when no entry lacks a condition).
	sinceNewest string

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

// SourceDeps are what a source reads from, publishes to, keeps its state in and reports to.
// Publisher, Checkpointer and one of Readers or Client are required; every other field may be
// left zero, which its comment describes.
type SourceDeps struct {
	// Readers list and watch in one pass (see RawReaders); when the Rules publish objects as
	// read (AsReadRules), bodies are not decoded at all. Client is used when Readers is nil.
	Readers *RawReaders
	// Client is a dynamic client of the cluster, read through when Readers is nil.
	Client dynamic.Interface
	// Publisher publishes the events, index records and mirror states. An AckPublisher
	// lets the pipeline await acknowledgements without a goroutine per publish.
	Publisher Publisher
	// Checkpointer loads and saves the resourceVersion the source resumes from.
	Checkpointer Checkpointer
	// Index records what the source published; nil keeps the index in memory only, so a
	// restart cannot diff a relist against it.
	Index ObjectIndex
	// Mirror, when set, is kept up to date with every object's state (before each event).
	Mirror StateMirror
	// Budget bounds, in bytes and shared with other sources, the list pages and changes held
	// between reading and ack; nil bounds them by counts only. Only list pages read through
	// Readers are sized and counted; changes always are.
	Budget *Budget
	// Rules filter and shape changes; nil publishes every change with managedFields
	// stripped.
	Rules Rules
	// NamespaceRules, when set, relay only objects whose namespace they select; Namespaces
	// supplies namespace labels and must be running (nil when the rules do not look at labels).
	NamespaceRules NamespaceRules
	Namespaces     *Namespaces
	// Observer is reported every publication and note; nil reports nothing.
	Observer Observer
	// History keeps the history epoch; it must be the Checkpointer's store of the same
	// checkpoints. Without it the epoch is kept in memory only, and a restart after a restore
	// goes back to epoch 0.
	History HistoryKeeper
	// Published, when set, is read before a delete is inferred, so that a delete published
	// just before a crash (its index record not yet written) is not published a second time
	// by the relist that follows.
	Published PublishedLog
	// Denials, when set, fail publishes at once when the server reports a permissions
	// violation for their subject; nil waits for the ack's timeout.
	Denials *Denials
	// Clock tells the time of events and times the source's waits (retries, checkpoint
	// ticks); nil is the real clock.
	Clock clock.WithTickerAndDelayedExecution
}

// NewSource returns a source of cfg wired to deps. It fails only when the REST client of the
// resource's group version cannot be made from Readers' configuration, when neither
// Readers nor Client is set, or when cfg.WatchList is not a WatchListMode.
func NewSource(cfg SourceConfig, deps SourceDeps) (*Source, error) {
	if !cfg.WatchList.Valid() {
		return nil, fmt.Errorf("new source: watch list mode %q: want auto, on or off", cfg.WatchList)
	}
	s := &Source{cfg: cfg, pub: deps.Publisher, ckpt: deps.Checkpointer, objIdx: deps.Index, mirror: deps.Mirror,
		obs: deps.Observer, key: CheckpointKey(cfg), index: newIndex(), clock: deps.Clock, rules: deps.Rules,
		nsRules: deps.NamespaceRules, namespaces: deps.Namespaces, published: deps.Published, denials: deps.Denials,
		budget: deps.Budget, hist: deps.History}
	if s.rules == nil {
		s.rules = defaultRules{}
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	gvr := cfg.Resource.GroupVersionResource
	switch {
	case deps.Readers != nil:
		ns := ""
		if cfg.Resource.Namespaced {
			ns = cfg.Namespace
		}
		rd, err := deps.Readers.Reader(gvr, ns, asReadOf(s.rules))
		if err != nil {
			return nil, err
		}
		s.client = budgetedReader{rd, s.budget}
		s.nsClient = func(ns string) reader { return budgetedReader{rd.Namespace(ns), s.budget} }
	case deps.Client != nil:
		ri := deps.Client.Resource(gvr)
		var rc dynamic.ResourceInterface = ri
		if cfg.Resource.Namespaced && cfg.Namespace != "" {
			rc = ri.Namespace(cfg.Namespace)
		}
		s.client = dynamicReader{rc}
		s.nsClient = func(ns string) reader { return dynamicReader{ri.Namespace(ns)} }
	default:
		return nil, errors.New("new source " + s.describe() + ": neither Readers nor Client set")
	}
	return s, nil
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
	cp := newCheckpointSaver(s.ckpt, s.key, rv, s.cfg.CheckpointInterval, s.clock)
	cp.fail = fail
	p := newPipeline(s.pub, s.cfg.Buffer, s.cfg.MaxInflight, s.clock, cp.advance, func(it *item, err error) {
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
	p.journal = s.journal
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
	if s.journal != nil {
		g.Go(func() error { return s.journal.Run(srcCtx) })
	}
	g.Go(func() error {
		cp.run(srcCtx, context.WithoutCancel(ctx), pipelineDone, finalSave, fail, log)
		return nil
	})
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
		wait := watchRetry.delay(failures)
		log.Warn().Err(err).Stringer("retry_in", wait).Msg("loading checkpoint and index failed, retrying")
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-s.clock.After(wait):
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
		j, err := s.objIdx.Load(ctx, s.key, func(object, uid, rv string, held []string) {
			loaded.put(object, entry{UID: uid, ResourceVersion: rv, Held: strings.Join(held, heldSeparator)})
		})
		if err != nil {
			return "", fmt.Errorf("load object index %q: %w", s.key, err)
		}
		s.index, s.journal = loaded, j
		log.Info().Int("objects", s.index.len()).Stringer("took", time.Since(start).Round(time.Millisecond)).Msg("object index loaded")
		if err := s.loadRuleSince(ctx, s.index.newest()); err != nil {
			return "", err
		}
	}
	return rv, nil
}

// ErrPermanent marks an error that retrying cannot fix (forbidden, unknown resource): the
// source stops and reports it; other sources carry on.
var ErrPermanent = errors.New("permanent error")

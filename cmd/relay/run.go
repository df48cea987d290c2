package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// publishAsyncTimeout is how long an asynchronous publish waits for its ack before it counts
// as failed and is retried: long enough for a JetStream leader election, short enough that a
// lost ack does not hold up an object for long.
const publishAsyncTimeout = 10 * time.Second

// run reads the configuration, connects to Kubernetes and NATS, and relays until ctx ends.
// Configuration problems (including resources the server does not know) come back as a
// *ConfigError before anything is published.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) > 1 {
		switch args[1] {
		case "-h", "--help", "help":
			if err := usage(stderr); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "\nrelay tail [flags] follows the stream and prints one line per event (relay tail --help).")
			fmt.Fprintln(stderr, "relay probe [--timeout D] URL checks an HTTP endpoint such as /readyz (relay probe --help).")
			return nil
		case tailCommand:
			return runTail(ctx, args[2:], os.Stdout, stderr)
		case probeCommand:
			return runProbe(ctx, args[2:], os.Stdout, stderr)
		}
		return &ConfigError{Problems: []Problem{{Var: "argument", Value: args[1], Reason: "the relay takes no arguments but the tail and probe subcommands; it is configured through environment variables (relay --help lists them)"}}}
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	ctx = log.WithContext(ctx)
	routeKlog(log)

	ready, live, m := &readiness{}, &readiness{}, newMetrics()
	if cfg.HTTPAddr != "" {
		_, stopHealth, err := serveHealth(ctx, cfg.HTTPAddr, ready, live, m.handler())
		if err != nil {
			return err
		}
		defer stopHealth()
	}

	// Every request to the apiserver reports to apiserver: failed attempts are logged, and
	// shown in /readyz and the metrics, from the first discovery request on.
	apiserver := newAPIServerMonitor(log)
	m.reg.MustRegister(apiserver.collectors()...)
	ready.setAlways(apiserver.notReady)
	kube, err := newKubeClients(cfg, apiserver.wrap)
	if err != nil {
		return err
	}
	resources, err := resolveResources(ctx, kube.discovery, cfg.Resources())
	if ctx.Err() != nil {
		return nil // asked to stop before the apiserver answered
	}
	if err != nil {
		return err
	}
	for _, r := range resources {
		log.Info().Str("resource", r.String()).Str("kind", r.Kind).
			Bool("namespaced", r.Namespaced).Msg("resource resolved")
	}
	// The rules' CEL expressions are type-checked against the resources' OpenAPI v3 schemas
	// (read only for resources with expressions, or for ce-dataschema), before anything else.
	specs := cfg.Resources()
	schemas := loadSchemas(ctx, openapi.NewClientWithContext(kube.discovery.RESTClient()), resources, schemaNeeds(cfg, specs), schemaDeadline)
	if ctx.Err() != nil {
		return nil // asked to stop before the apiserver answered
	}
	if err := checkRuleTypes(ctx, cfg, specs, resources, schemas); err != nil {
		return err
	}
	dataSchemas := make([]string, len(resources))
	for i, r := range resources {
		dataSchemas[i] = dataSchemaURI(cfg.DataSchemaBaseURL, r.GroupVersion(), schemas[i].component)
		if cfg.DataSchemaBaseURL != "" && dataSchemas[i] == "" {
			log.Info().Str("resource", r.String()).Str("reason", schemas[i].untyped).Msg("no ce-dataschema for the resource: its schema is unknown")
		}
	}

	// A NATS connection lost for good ends the run with that cause.
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	conn, err := connectNATS(ctx, cfg, lost)
	if errors.Is(context.Cause(ctx), natsconn.ErrClosed) {
		return context.Cause(ctx)
	}
	if ctx.Err() != nil {
		return nil // asked to stop before NATS answered
	}
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	nc := conn.NATS()
	// A denied publish reaches the client only as an asynchronous error; Denials hands it to
	// the publish waiting for its ack.
	denials := relay.NewDenials()
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if !denials.Observe(err) {
			log.Warn().Err(err).Msg("nats error")
		}
	})

	plans, err := planSources(cfg, resources, dataSchemas, nc.MaxPayload())
	if err != nil {
		return err
	}
	// In RELAY_JS_DOMAIN or under RELAY_JS_API_PREFIX when set: the stream and every bucket.
	// Events go through the AckPublisher (below); js makes only requests (stream, buckets,
	// KV), so it needs no asynchronous publish window.
	js, err := cfg.NATS().JetStream(nc)
	if err != nil {
		return err
	}
	// A relay upgraded from the legacy default names keeps them (docs/operations.md, Upgrading).
	err = setupRetry(ctx, log, "legacy names", func() (err error) {
		cfg, err = adoptLegacyNames(ctx, js, cfg)
		return err
	})
	if err != nil {
		return setupFailed(ctx, err, "RELAY_STREAM", cfg.Stream)
	}
	var stream jetstream.Stream
	err = setupRetry(ctx, log, "stream "+cfg.Stream, func() (err error) {
		stream, err = relay.EnsureStream(ctx, js, relay.StreamConfig{
			Name:        cfg.Stream,
			Prefix:      cfg.SubjectPrefix,
			Cluster:     cfg.Cluster,
			Replicas:    cfg.StreamReplicas.Int,
			Duplicates:  cfg.DuplicateWindow.Duration,
			MaxAge:      cfg.MaxAge.Duration,
			MaxBytes:    cfg.MaxBytes.Bytes,
			Compression: cfg.StreamCompression.jetstream(),
			Resources:   resources,
			MaxPayload:  int(nc.MaxPayload()),
		})
		return err
	})
	if err != nil {
		return setupFailed(ctx, err, "RELAY_STREAM", cfg.Stream)
	}
	var store *checkpoint.Store
	err = setupRetry(ctx, log, "bucket "+cfg.CheckpointBucket, func() (err error) {
		store, err = checkpoint.Open(ctx, js, checkpoint.Config{Bucket: cfg.CheckpointBucket, Replicas: cfg.StreamReplicas.Int,
			LongestValue: longestDerivedRecord(plans)})
		return err
	})
	if err != nil {
		return setupFailed(ctx, err, "RELAY_CHECKPOINT_BUCKET", cfg.CheckpointBucket)
	}
	ckpts := newTrackedCheckpoints(store)
	var objIdx *checkpoint.Index
	err = setupRetry(ctx, log, "bucket "+cfg.IndexBucket, func() (err error) {
		objIdx, err = checkpoint.OpenIndex(ctx, js, checkpoint.IndexConfig{Bucket: cfg.IndexBucket, Replicas: cfg.StreamReplicas.Int})
		return err
	})
	if err != nil {
		return setupFailed(ctx, err, "RELAY_INDEX_BUCKET", cfg.IndexBucket)
	}

	dyn, err := dynamic.NewForConfig(kube.rest)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	var mirror *checkpoint.Mirror
	if len(cfg.MirrorList.Items) > 0 {
		err = setupRetry(ctx, log, "bucket "+cfg.MirrorBucket, func() (err error) {
			mirror, err = checkpoint.OpenMirror(ctx, js, checkpoint.MirrorConfig{Bucket: cfg.MirrorBucket, Replicas: cfg.StreamReplicas.Int,
				Cluster: cfg.Cluster, Resources: mirroredResources(plans)})
			return err
		})
		if err != nil {
			return setupFailed(ctx, err, "RELAY_MIRROR_BUCKET", cfg.MirrorBucket)
		}
		recordMirrored(ctx, log, mirror, cfg.MirrorBucket)
	}
	// Namespace labels are followed only when a rule selects namespaces by label.
	var namespaces *relay.Namespaces
	for _, p := range plans {
		if p.cfg.Resource.Namespaced && p.rules.NamespaceSelector() != nil {
			namespaces = relay.NewNamespaces(dyn)
			break
		}
	}
	raw, err := relay.NewRawReaders(kube.rest)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	budget := newBudget(log, cfg)
	m.observeBudget(budget)
	// Every source publishes through one reply subscription; the pipelines bound what is in
	// flight (RELAY_MAX_INFLIGHT each).
	pub, err := relay.NewAckPublisher(nc, publishAsyncTimeout)
	if err != nil {
		return fmt.Errorf("nats publisher: %w", err)
	}
	defer pub.Close()
	built := make([]*relay.Source, len(plans))
	for i, p := range plans {
		deps := relay.SourceDeps{Readers: raw, Publisher: pub, Checkpointer: ckpts, Index: objectIndex{Index: objIdx, ckpts: ckpts, denials: denials}, Budget: budget,
			Rules: rulesOf(p.rules, log.With().Str("resource", p.cfg.Resource.String()).Str("namespace", p.cfg.Namespace).Logger()), Observer: m.sourceObserver(p.cfg.Resource), Denials: denials,
			History: trackedHistory{store: store, ckpts: ckpts}, Published: relay.StreamLog{Stream: stream}}
		if p.cfg.Resource.Namespaced {
			deps.NamespaceRules = sourceRules{p.rules}
			// Only sources that select by namespace labels wait for them.
			if p.rules.NamespaceSelector() != nil {
				deps.Namespaces = namespaces
			}
		}
		if p.mirrored {
			deps.Mirror = mirror
		}
		if built[i], err = relay.NewSource(p.cfg, deps); err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
	}
	rl := relay.New(built...).WithNamespaces(namespaces)
	m.observe(built, ckpts, nc)
	log.Info().Str("version", buildVersion()).Int("sources", len(built)).Str("stream", cfg.Stream).Str("bucket", cfg.CheckpointBucket).
		Str("index_bucket", cfg.IndexBucket).Msg("relay started")
	err = relayOrStandBy(ctx, cfg, kube.rest, conn, rl, ckpts, ready, live, m)
	log.Info().Msg("relay stopped")
	if cause := context.Cause(ctx); errors.Is(cause, natsconn.ErrClosed) {
		return cause
	}
	return err
}

// setupFailed is run's answer when creating or opening the stream or a bucket failed: nothing
// when asked to stop meanwhile, the lost connection when NATS closed for good, else the
// failure (a configuration error when the stream or bucket is unusable).
func setupFailed(ctx context.Context, err error, name, value string) error {
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, natsconn.ErrClosed) {
			return cause
		}
		return nil
	}
	return unusable(err, name, value)
}

// unusable turns an existing stream or bucket whose settings refuse the relay's messages into
// a configuration error naming the variable that selects it; other errors pass unchanged.
func unusable(err error, name, value string) error {
	if errors.Is(err, relay.ErrStreamUnusable) || errors.Is(err, checkpoint.ErrBucketUnusable) {
		return &ConfigError{Problems: []Problem{{Var: name, Value: value, Reason: err.Error()}}}
	}
	return err
}

// sourcePlan is one source to run: what it watches, whether it feeds the state mirror, and
// the compiled rules that filter and shape its changes.
type sourcePlan struct {
	cfg      relay.SourceConfig
	mirrored bool
	rules    *filter.Program
}

// longestDerivedRecord is the length of the longest derived rules record a source of plans
// saves in the checkpoint bucket (see relay.DerivedRulesRecordSize); 0 when none has state
// conditions.
func longestDerivedRecord(plans []sourcePlan) int {
	n := 0
	for _, p := range plans {
		if p.rules != nil && p.rules.HasDerived() {
			n = max(n, relay.DerivedRulesRecordSize(p.rules.StateNames()))
		}
	}
	return n
}

// planSources returns one source per resource, or per resource and namespace when
// namespaces are listed (cluster-scoped resources are always watched whole). resources are
// in the order of cfg.Resources(); dataSchemas holds the ce-dataschema of each ("" for none).
// A rule that does not compile for its resource is a configuration error.
func planSources(cfg Config, resources []relay.Resource, dataSchemas []string, maxPayload int64) ([]sourcePlan, error) {
	var out []sourcePlan
	var ps problems
	specs := cfg.Resources()
	for i, r := range resources {
		prog, err := filter.Compile(cfg.Rule(specs[i]), r)
		if err != nil {
			name, value := "RELAY_RULES_FILE", cfg.RulesFile
			if cfg.RulesFile == "" {
				name, value = "RELAY_RESOURCES", specs[i].Raw
			}
			ps.addf(name, value, "%s: %v", specs[i].Raw, err)
			continue
		}
		base := relay.SourceConfig{
			Cluster:            cfg.Cluster,
			Prefix:             cfg.SubjectPrefix,
			Resource:           r,
			LabelSelector:      prog.LabelSelector(),
			FieldSelector:      prog.FieldSelector(),
			InitialSync:        cfg.InitialSync == InitialSyncPublish,
			Buffer:             cfg.BufferSize.Int,
			MaxInflight:        cfg.MaxInflight.Int,
			CheckpointInterval: cfg.CheckpointInterval.Duration,
			MaxPayload:         int(maxPayload),
			ShutdownTimeout:    cfg.ShutdownTimeout.Duration,
			Redacted:           strings.Join(prog.Redacted(), ","),
			DataSchema:         dataSchemas[i],
			WatchList:          cfg.WatchList,
		}
		plan := sourcePlan{cfg: base, mirrored: cfg.Mirrored(specs[i]), rules: prog}
		namespaces := prog.ServerNamespaces()
		if !r.Namespaced || len(namespaces) == 0 {
			out = append(out, plan)
			continue
		}
		for _, ns := range namespaces {
			p := plan
			p.cfg.Namespace = ns
			out = append(out, p)
		}
	}
	return out, ps.err()
}

func newLogger(cfg Config, w io.Writer) zerolog.Logger {
	if cfg.LogFormat == LogFormatConsole {
		// Colours only on a terminal: files and pipes get plain text.
		f, isFile := w.(*os.File)
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isFile || !isTerminal(f)}
	}
	return zerolog.New(w).Level(cfg.LogLevel.ZerologLevel()).With().Timestamp().Logger()
}

// isTerminal reports whether f is a character device (a terminal), not a file or a pipe.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// usage prints every variable with its default and meaning.
func usage(w io.Writer) error {
	fmt.Fprintln(w, "relay: list-watch Kubernetes resources and publish every change to NATS JetStream.")
	fmt.Fprintln(w, "Configured through these environment variables; a value outside its RANGE is refused (exit status 2):")
	return writeUsage(w)
}

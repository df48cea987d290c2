package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// legacyLookupTimeout bounds each look-up of a legacy stream or bucket. A NATS user not
// granted it gets no answer at all (the server only reports the violation), so without a
// bound the relay would wait for the request's timeout on every start.
const legacyLookupTimeout = 2 * time.Second

// adoptLegacyNames returns cfg with legacy names (event.LegacyStream and its kin) where a relay
// upgraded from a version whose defaults they were keeps its state under them, so that it
// resumes from its checkpoints instead of publishing every object again:
//
//   - the stream's name is derived, the per-cluster stream does not exist, and the legacy
//     stream exists and captures this relay's subjects: the legacy name of every name that
//     is derived (JetStream would refuse the per-cluster stream over the same subjects, so
//     a relay that set only some bucket names keeps the legacy stream too);
//   - otherwise, the checkpoint bucket's name is derived, the per-cluster checkpoint bucket
//     does not exist, and the legacy checkpoint bucket holds checkpoints of this cluster: the
//     legacy name of every bucket whose name is derived (the stream keeps its name; this is
//     the migration of docs/operations.md, "Upgrading", and a relay that set only
//     RELAY_STREAM);
//   - otherwise, the checkpoint bucket's name is set and that bucket holds checkpoints of this
//     cluster: the legacy name of the index and mirror buckets whose names are derived, whose
//     per-cluster bucket does not exist and whose legacy bucket does
//     (adoptLegacyBesideCheckpoints).
//
// Each adoption is logged at WARN with the variables that pin it. A legacy stream that cannot
// be looked up (no answer, no permission) counts as absent: JetStream refuses a second stream
// over the same subjects in an account, so a missed legacy stream stops the relay with that
// refusal instead of doubling its events. A legacy checkpoint bucket that does not answer in
// time is an error, which run retries: nothing would refuse the new empty buckets, and a relay
// that took them would publish every object again and never learn of the objects deleted
// while it was stopped.
func adoptLegacyNames(ctx context.Context, js jetstream.JetStream, cfg Config) (Config, error) {
	d := cfg.derivedNames
	if d.stream {
		adopt, err := legacyStreamHolds(ctx, js, cfg)
		if err != nil || adopt {
			if adopt {
				cfg = legacyNamed(ctx, cfg, d)
			}
			return cfg, err
		}
	}
	if !d.checkpoints {
		return adoptLegacyBesideCheckpoints(ctx, js, cfg, d)
	}
	adopt, err := legacyCheckpointsHold(ctx, js, cfg)
	if adopt {
		d.stream = false
		cfg = legacyNamed(ctx, cfg, d)
	}
	return cfg, err
}

// adoptLegacyBesideCheckpoints handles a relay that set its checkpoint bucket (and its stream)
// but left the index or mirror bucket to the default: before the upgrade those were
// kube-relay-index and kube-relay-mirror. When the checkpoint bucket holds this cluster's
// checkpoints (the relay resumes rather than starts), each such bucket whose per-cluster
// bucket does not exist and whose legacy bucket does keeps the legacy name. Without it the
// relay would resume from its checkpoints with an empty index: a relist after a 410 would
// publish every object again and miss every delete made while it could not watch. A legacy
// bucket is shared by clusters the way it was before (its keys start with the cluster).
func adoptLegacyBesideCheckpoints(ctx context.Context, js jetstream.JetStream, cfg Config, d derivedNames) (Config, error) {
	if !d.index && (!d.mirror || len(cfg.MirrorList.Items) == 0) {
		return cfg, nil
	}
	resuming, err := bucketHoldsCluster(ctx, js, cfg.CheckpointBucket, cfg.Cluster)
	if err != nil || !resuming {
		return cfg, err
	}
	which := derivedNames{}
	for _, b := range []struct {
		derived        bool
		adopt          *bool
		name, fallback string
	}{
		{d.index, &which.index, cfg.IndexBucket, event.LegacyIndexBucket},
		// A relay without RELAY_MIRROR_RESOURCES uses no mirror, and its NATS user may not
		// be granted one.
		{d.mirror && len(cfg.MirrorList.Items) > 0, &which.mirror, cfg.MirrorBucket, event.LegacyMirrorBucket},
	} {
		if !b.derived {
			continue
		}
		if *b.adopt, err = legacyBucketInstead(ctx, js, b.name, b.fallback); err != nil {
			return cfg, err
		}
	}
	if which.index || which.mirror {
		cfg = legacyNamed(ctx, cfg, which)
	}
	return cfg, nil
}

// bucketHoldsCluster reports whether bucket exists and holds a key of cluster (checkpoint
// keys start with the cluster's token): the bucket's stream info filtered to the cluster's
// keys, which a NATS user needs no more than STREAM.INFO for.
func bucketHoldsCluster(ctx context.Context, js jetstream.JetStream, bucket, cluster string) (bool, error) {
	s, err := js.Stream(ctx, kvStreamPrefix+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	var info *jetstream.StreamInfo
	if err == nil {
		info, err = s.Info(ctx, jetstream.WithSubjectFilter("$KV."+bucket+"."+cluster+".>"))
	}
	if err != nil {
		return false, fmt.Errorf("look up bucket %s: %w", bucket, err)
	}
	return len(info.State.Subjects) > 0, nil
}

// legacyBucketInstead reports whether bucket does not exist and legacy does. A legacy bucket
// that does not answer in time is an error, which run retries, for the reason
// legacyCheckpointsHold gives.
func legacyBucketInstead(ctx context.Context, js jetstream.JetStream, bucket, legacy string) (bool, error) {
	_, err := js.KeyValue(ctx, bucket)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, fmt.Errorf("look up bucket %s: %w", bucket, err)
	}
	lctx, cancel := context.WithTimeout(ctx, legacyLookupTimeout)
	defer cancel()
	_, err = js.KeyValue(lctx, legacy)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return false, nil
	case noAnswer(ctx, err):
		return false, fmt.Errorf("look up bucket %s, which this cluster used before its per-cluster names (grant the relay's user $JS.API.STREAM.INFO.%s%s, or set the bucket's variable): %w",
			legacy, kvStreamPrefix, legacy, err)
	default:
		unknownLegacy(ctx, err, legacy)
		return false, nil
	}
}

// legacyStreamHolds reports whether the per-cluster stream does not exist and the legacy
// stream captures cfg's subjects.
func legacyStreamHolds(ctx context.Context, js jetstream.JetStream, cfg Config) (bool, error) {
	_, err := js.Stream(ctx, cfg.Stream)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("look up stream %s: %w", cfg.Stream, err)
	}
	lctx, cancel := context.WithTimeout(ctx, legacyLookupTimeout)
	defer cancel()
	legacy, err := js.Stream(lctx, event.LegacyStream)
	if err != nil {
		unknownLegacy(ctx, err, event.LegacyStream)
		return false, nil
	}
	return relay.Captures(legacy.CachedInfo().Config.Subjects, cfg.SubjectPrefix, cfg.Cluster), nil
}

// legacyCheckpointsHold reports whether the per-cluster checkpoint bucket does not exist and
// the legacy one holds a checkpoint of cfg's cluster (keys start with the cluster's token).
func legacyCheckpointsHold(ctx context.Context, js jetstream.JetStream, cfg Config) (bool, error) {
	_, err := js.KeyValue(ctx, cfg.CheckpointBucket)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, fmt.Errorf("look up bucket %s: %w", cfg.CheckpointBucket, err)
	}
	lctx, cancel := context.WithTimeout(ctx, legacyLookupTimeout)
	defer cancel()
	holds, err := bucketHoldsCluster(lctx, js, event.LegacyCheckpointBucket, cfg.Cluster)
	switch {
	case err == nil:
		return holds, nil
	case noAnswer(ctx, err):
		return false, fmt.Errorf("look up bucket %s, which may hold this cluster's checkpoints (grant the relay's user $JS.API.STREAM.INFO.%s%s, or set RELAY_CHECKPOINT_BUCKET): %w",
			event.LegacyCheckpointBucket, kvStreamPrefix, event.LegacyCheckpointBucket, err)
	default:
		unknownLegacy(ctx, err, event.LegacyCheckpointBucket)
		return false, nil
	}
}

// noAnswer reports whether err is a look-up that got no answer in time while ctx lives on: a
// slow server, or a NATS user denied the subject, which the server answers with silence.
func noAnswer(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout))
}

// kvStreamPrefix starts the name of a key-value bucket's stream: "KV_<bucket>".
const kvStreamPrefix = "KV_"

// unknownLegacy logs a legacy stream or bucket that could not be looked up; a missing one is
// the usual case and is not logged.
func unknownLegacy(ctx context.Context, err error, name string) {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) || ctx.Err() != nil {
		return
	}
	zerolog.Ctx(ctx).Info().Err(err).Str("legacy", name).Msg("legacy stream or bucket not looked up: using the per-cluster names")
}

// legacyNamed returns cfg with the legacy name of each name in which, and logs the adoption.
func legacyNamed(ctx context.Context, cfg Config, which derivedNames) Config {
	var pin []string
	for _, n := range []struct {
		on         bool
		name       *string
		variable   string
		legacyName string
	}{
		{which.stream, &cfg.Stream, "RELAY_STREAM", event.LegacyStream},
		{which.checkpoints, &cfg.CheckpointBucket, "RELAY_CHECKPOINT_BUCKET", event.LegacyCheckpointBucket},
		{which.index, &cfg.IndexBucket, "RELAY_INDEX_BUCKET", event.LegacyIndexBucket},
		{which.mirror, &cfg.MirrorBucket, "RELAY_MIRROR_BUCKET", event.LegacyMirrorBucket},
	} {
		if n.on {
			*n.name = n.legacyName
			pin = append(pin, n.variable+"="+n.legacyName)
		}
	}
	zerolog.Ctx(ctx).Warn().Str("stream", cfg.Stream).Str("checkpoint_bucket", cfg.CheckpointBucket).
		Str("index_bucket", cfg.IndexBucket).Str("mirror_bucket", cfg.MirrorBucket).Str("pin", strings.Join(pin, " ")).
		Msg("using legacy stream or bucket names, which hold this cluster's events and checkpoints: set the variables of pin to keep them, or migrate to the per-cluster names (docs/operations.md, Upgrading)")
	return cfg
}

package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// MaxPartitions bounds PartitionConfig.Partitions. Each partition is a durable consumer,
	// and every member of the group keeps a pull subscription on each (M members, N
	// partitions: M×N subscriptions): a few hundred keep that cheap for the server, and are
	// far more parallelism than one stream's deliveries need.
	MaxPartitions = 256
	// DefaultPartitionAckWait is the AckWait of a partition's consumer when PartitionConfig
	// sets none: the server's default. After a member dies holding an event, its partition
	// waits this long before the event is delivered again (docs/events.md, "Partitioned
	// consumption").
	DefaultPartitionAckWait = 30 * time.Second
	// defaultPrefix is the relay's default subject prefix (RELAY_SUBJECT_PREFIX).
	defaultPrefix = "kube"
	// priorityGroup is the one priority group of every partition's consumer: members pull
	// with a priority of their own in it (JoinPartitioned).
	priorityGroup = "members"
	// maxStreamName bounds a stream name: the server's limit, as for consumer names.
	maxStreamName = 255
)

// Stream metadata keys under which EnsurePartitioned records what a group's stream is, so that
// JoinPartitioned needs only its name and a second EnsurePartitioned can check it.
const (
	metaPartitions = "io.kube-nats-relay.partitions"
	metaPrefix     = "io.kube-nats-relay.prefix"
	metaSource     = "io.kube-nats-relay.source"
)

// PartitionConfig describes a partitioned consumer group: a stream of its own that sources the
// relay's stream (or an aggregate) with the partition number of each event's object written in
// front of its subject, and one durable consumer per partition.
type PartitionConfig struct {
	// Name is the group's stream, and the group's name. Required.
	Name string
	// Source is the stream whose events the group shares out: the relay's stream
	// (RELAY_STREAM), or an aggregate stream of several clusters (EnsureAggregate), in the
	// same JetStream domain and account as the group. Required.
	Source string
	// Prefix is the relay's subject prefix (RELAY_SUBJECT_PREFIX); empty means "kube".
	Prefix string
	// Partitions is how many partitions the objects are spread over: at most that many events
	// are handled at a time, one per partition. 1 to MaxPartitions. It cannot change once the
	// group exists (docs/events.md says how to move to another count).
	Partitions int
	// AckWait is how long a partition waits for an event's acknowledgement before it delivers
	// the event again; 0 means DefaultPartitionAckWait. It is the longest pause of a partition
	// after its member died. EnsurePartitioned applies it to existing consumers too: give
	// every caller the same.
	AckWait time.Duration
	// StartSequence makes a new group take events from this sequence of Source on: the
	// sequence after Source's last event for a group of the events to come, or
	// ReplacementStart of the group a new one replaces (a new partition count).
	StartSequence uint64
	// ReplayAll makes a new group take every event Source holds, from its first. A new group
	// needs StartSequence or ReplayAll, so that no call re-creates a deleted group with a
	// replay of the whole history by mistake.
	ReplayAll bool
	// Filters, when set, make the group take only the events they select, of their
	// objects' derived events too; none means every event of Source. Each must select whole
	// objects (no Name, no Type), and no two may overlap (the server refuses them). An object
	// of a filter that sets the namespace is partitioned by name. They cannot change once the
	// group exists.
	Filters []event.Filter
	// Replicas is the group stream's replica count; 0 means 1.
	Replicas int
}

// prefix returns the subject prefix, defaulted.
func (c PartitionConfig) prefix() string {
	if c.Prefix == "" {
		return defaultPrefix
	}
	return c.Prefix
}

// ackWait returns the consumers' AckWait, defaulted.
func (c PartitionConfig) ackWait() time.Duration {
	if c.AckWait == 0 {
		return DefaultPartitionAckWait
	}
	return c.AckWait
}

// validate reports every problem with c at once.
func (c PartitionConfig) validate() error {
	var errs []error
	if err := validateStreamName(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("name: %w", err))
	}
	if err := validateStreamName(c.Source); err != nil {
		errs = append(errs, fmt.Errorf("source: %w", err))
	}
	if c.Name != "" && c.Name == c.Source {
		errs = append(errs, fmt.Errorf("name %q: the same as the source", c.Name))
	}
	if err := event.ValidatePrefix(c.prefix()); err != nil {
		errs = append(errs, fmt.Errorf("prefix: %w", err))
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions %d: want 1 to %d", c.Partitions, MaxPartitions))
	}
	if c.AckWait < 0 {
		errs = append(errs, fmt.Errorf("ack wait %s: want 0 (the default) or more", c.AckWait))
	}
	if c.StartSequence > 0 && c.ReplayAll {
		errs = append(errs, fmt.Errorf("start sequence %d and replay all: want one of them", c.StartSequence))
	}
	if err := c.validateFilters(); err != nil {
		errs = append(errs, err)
	}
	if c.Replicas < 0 {
		errs = append(errs, fmt.Errorf("replicas %d: want 0 or more", c.Replicas))
	}
	return errors.Join(errs...)
}

// validateStreamName checks a JetStream stream name: not empty, not longer than the server
// takes, and without the bytes the server refuses ('.', '*', '>', path separators, white
// space and control bytes).
func validateStreamName(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if len(name) > maxStreamName {
		return fmt.Errorf("%d bytes: want at most %d", len(name), maxStreamName)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(".*>/\\", r) {
			return fmt.Errorf("%q: want no '.', '*', '>', '/', '\\', white space or control characters", name)
		}
	}
	return nil
}

// transform returns the subject transform of the group's source: every event subject
// <prefix>.<cluster>.<group>.<version>.<resource>.<namespace>.<name>.<rest> (<rest> being the
// type, or derived.<event-name>) becomes <partition>.<the same subject>, the partition being
// the server's hash of the namespace and name tokens (the fifth and sixth wildcards).
func (c PartitionConfig) transform() jetstream.SubjectTransformConfig {
	p := c.prefix()
	dest := fmt.Sprintf("{{partition(%d,5,6)}}.%s", c.Partitions, p)
	for i := 1; i <= 6; i++ {
		dest += fmt.Sprintf(".{{wildcard(%d)}}", i)
	}
	return jetstream.SubjectTransformConfig{Source: p + ".*.*.*.*.*.*.>", Destination: dest + ".>"}
}

// streamConfig returns the configuration of the group's stream.
func (c PartitionConfig) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Name,
		Description: fmt.Sprintf("kube-nats-relay events of %s in %d partitions", c.Source, c.Partitions),
		// Work queue: an event is removed once its partition's consumer has it
		// acknowledged, so the copy holds only the group's backlog.
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
		Replicas:  max(c.Replicas, 1),
		Sources: []*jetstream.StreamSource{{
			Name:              c.Source,
			OptStartSeq:       c.StartSequence,
			SubjectTransforms: c.transforms(),
		}},
		Metadata: map[string]string{
			metaPartitions: strconv.Itoa(c.Partitions),
			metaPrefix:     c.prefix(),
			metaSource:     c.Source,
			metaFilters:    c.filterSubjects(),
		},
	}
}

// partitionConsumer returns the configuration of partition p's consumer.
func (c PartitionConfig) partitionConsumer(p int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       partitionConsumerName(p),
		Description:   fmt.Sprintf("partition %d of %d of %s", p, c.Partitions, c.Name),
		FilterSubject: strconv.Itoa(p) + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// One event in flight per partition: the next event of the partition, and so of
		// any of its objects, is delivered only once this one is acknowledged, also when it
		// is redelivered after AckWait. That is what keeps each object's order, and what
		// keeps two members from handling one object's events at the same time.
		MaxAckPending:  1,
		AckWait:        c.ackWait(),
		PriorityPolicy: jetstream.PriorityPolicyPrioritized,
		PriorityGroups: []string{priorityGroup},
	}
}

// partitionConsumerName names partition p's consumer in the group's stream.
func partitionConsumerName(p int) string { return "partition-" + strconv.Itoa(p) }

// EnsurePartitioned creates the partitioned group cfg describes, or checks an existing one, and
// returns its stream. It is the deployment step of a group, run once (a Job, a Helm hook, an
// operator) or by each member at start: JoinPartitioned never creates. It is idempotent on an
// existing group; it creates a missing one only if cfg says where in Source it starts
// (StartSequence, or ReplayAll), and fails with ErrNoStartPosition otherwise, so that a member
// that runs it after the group was deleted does not replay Source's whole history by mistake.
// A Source that does not exist fails with ErrSourceNotFound.
//
// The group's stream sources cfg.Source through a subject transform that puts the partition
// of each event's object in front of its subject: partition(Partitions) over the namespace
// and name tokens, so every event of an object, its derived events included, lands in one
// partition; objects of one namespace and name in different resources or clusters share one.
// Each partition has a durable consumer that delivers one event at a time (MaxAckPending 1)
// and takes pull requests by priority (the server's prioritized priority policy, which needs
// nats-server 2.12 or later: on an older server EnsurePartitioned fails with ErrServerTooOld
// and creates nothing). If a consumer cannot be created, the stream this call created is
// deleted again.
//
// The stream is a work queue: it keeps an event until its partition's consumer has it
// acknowledged, so it holds the group's backlog, not a second history. One stream serves one
// group: a second group needs a stream of its own.
//
// An existing stream of that name must be this group: the same source, prefix and partition
// count, recorded in its metadata; otherwise EnsurePartitioned fails with ErrNotPartitioned and
// changes nothing. Missing consumers are created; an existing one whose AckWait differs is
// updated, and one that differs otherwise fails with ErrConsumerConflict.
func EnsurePartitioned(ctx context.Context, js jetstream.JetStream, cfg PartitionConfig) (jetstream.Stream, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("partitioned group %q: %w", cfg.Name, err)
	}
	if _, err := js.Stream(ctx, cfg.Source); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("partitioned group %q: source %q: %w", cfg.Name, cfg.Source, ErrSourceNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("partitioned group %q: source %q: %w", cfg.Name, cfg.Source, err)
	}
	want := cfg.streamConfig()
	s, err := js.Stream(ctx, cfg.Name)
	created := false
	switch {
	case err == nil:
		err = checkPartitioned(s.CachedInfo().Config, want)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, created, err = createPartitioned(ctx, js, cfg, want)
	}
	if err != nil {
		return nil, fmt.Errorf("partitioned group %q: %w", cfg.Name, err)
	}
	for p := range cfg.Partitions {
		if err := ensurePartitionConsumer(ctx, js, cfg.Name, cfg.partitionConsumer(p)); err != nil {
			if created {
				// Leave no stream that sources events nobody can consume.
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
				if derr := js.DeleteStream(dctx, cfg.Name); derr != nil {
					err = errors.Join(err, fmt.Errorf("delete the stream created: %w", derr))
				}
				cancel()
			}
			return nil, fmt.Errorf("partitioned group %q: %w", cfg.Name, err)
		}
	}
	return s, nil
}

// createPartitioned creates the group's stream, if cfg says where to start and the server
// takes the consumers; created is false when another caller created it first.
func createPartitioned(ctx context.Context, js jetstream.JetStream, cfg PartitionConfig, want jetstream.StreamConfig) (s jetstream.Stream, created bool, err error) {
	if cfg.StartSequence == 0 && !cfg.ReplayAll {
		return nil, false, fmt.Errorf("%w: set StartSequence (ReplacementStart of the group it replaces, or past the source's last event) or ReplayAll", ErrNoStartPosition)
	}
	if v := js.Conn().ConnectedServerVersion(); !serverAtLeast(v, minPartitionServer) {
		return nil, false, fmt.Errorf("%w: server %s, want %d.%d or later for prioritized pulls", ErrServerTooOld, v, minPartitionServer[0], minPartitionServer[1])
	}
	s, err = js.CreateStream(ctx, want)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another caller was first
		if s, err = js.Stream(ctx, cfg.Name); err == nil {
			err = checkPartitioned(s.CachedInfo().Config, want)
		}
		return s, false, err
	}
	return s, err == nil, err
}

// minPartitionServer is the first nats-server release with the prioritized priority policy.
var minPartitionServer = [2]int{2, 12}

// cleanupTimeout bounds the deletion of a stream EnsurePartitioned created and could not
// complete: a request to the server, done even when ctx has ended.
const cleanupTimeout = 10 * time.Second

// serverAtLeast reports whether server version v ("2.12.1", "v2.12.0-beta") is at least
// major.minor; a version it cannot read is taken as new enough, the server then refusing the
// consumers itself.
func serverAtLeast(v string, want [2]int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return major > want[0] || major == want[0] && minor >= want[1]
}

// checkPartitioned fails with ErrNotPartitioned unless have is the stream of the group want
// describes.
func checkPartitioned(have, want jetstream.StreamConfig) error {
	var diffs []string
	for _, k := range []string{metaSource, metaPrefix, metaPartitions, metaFilters} {
		if have.Metadata[k] != want.Metadata[k] {
			diffs = append(diffs, fmt.Sprintf("%s %q, want %q", strings.TrimPrefix(k, "io.kube-nats-relay."), have.Metadata[k], want.Metadata[k]))
		}
	}
	if have.Retention != jetstream.WorkQueuePolicy {
		diffs = append(diffs, fmt.Sprintf("retention %s, want %s", have.Retention, jetstream.WorkQueuePolicy))
	}
	if len(have.Subjects) > 0 || have.Mirror != nil {
		diffs = append(diffs, fmt.Sprintf("subjects %q or a mirror, want only the source", have.Subjects))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s (a group's partition count cannot change: create a group of another name, e.g. %s_P%s, starting at ReplacementStart of this one)",
			ErrNotPartitioned, strings.Join(diffs, "; "), want.Name, want.Metadata[metaPartitions])
	}
	return nil
}

// ensurePartitionConsumer creates a partition's consumer, or checks and updates it.
func ensurePartitionConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig) error {
	cons, err := js.CreateConsumer(ctx, stream, want)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrConsumerExists) {
		return fmt.Errorf("consumer %q: %w", want.Durable, err)
	}
	if cons, err = js.Consumer(ctx, stream, want.Durable); err != nil {
		return fmt.Errorf("consumer %q: %w", want.Durable, err)
	}
	have := cons.CachedInfo().Config
	var diffs []string
	if got := filterSet(have); len(got) != 1 || got[0] != want.FilterSubject {
		diffs = append(diffs, fmt.Sprintf("filters %q, want %q", got, want.FilterSubject))
	}
	if have.AckPolicy != want.AckPolicy || have.MaxAckPending != want.MaxAckPending {
		diffs = append(diffs, fmt.Sprintf("ack policy %s and max ack pending %d, want %s and %d",
			have.AckPolicy, have.MaxAckPending, want.AckPolicy, want.MaxAckPending))
	}
	if have.PriorityPolicy != want.PriorityPolicy || len(have.PriorityGroups) != 1 || have.PriorityGroups[0] != priorityGroup {
		diffs = append(diffs, fmt.Sprintf("priority policy %s over groups %q, want %s over %q",
			policyName(have.PriorityPolicy), have.PriorityGroups, policyName(want.PriorityPolicy), want.PriorityGroups))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("consumer %q: %w: %s", want.Durable, ErrConsumerConflict, strings.Join(diffs, "; "))
	}
	if have.AckWait == want.AckWait {
		return nil
	}
	have.AckWait = want.AckWait
	if _, err := js.UpdateConsumer(ctx, stream, have); err != nil {
		return fmt.Errorf("consumer %q: update ack wait to %s: %w", want.Durable, want.AckWait, err)
	}
	return nil
}

// policyName names a priority policy as the server's configuration does.
func policyName(p jetstream.PriorityPolicy) string {
	b, err := p.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("policy %d", int(p))
	}
	return strings.Trim(string(b), `"`)
}

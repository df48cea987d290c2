package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// DefaultAggregateDuplicates is the duplicate window an Aggregate gets when it sets none: the
// relay's default RELAY_DUPLICATE_WINDOW, so that a change the relay re-published inside its
// own window, and that its cluster's stream therefore dropped, is not a concern here either,
// and a repeat stored by a cluster's stream (a replay outside that stream's window) is
// dropped by the aggregate when it comes within this window of the first copy.
const DefaultAggregateDuplicates = 10 * time.Minute

// ensureAttempts bounds how often EnsureAggregate re-reads and updates a stream that another
// writer changed at the same time: the server has no compare-and-swap for stream
// configurations, so it checks that its own sources are there and tries again (it cannot see
// what a concurrent update it overwrote had added).
const ensureAttempts = 3

// ClusterStream names one cluster's event stream, as a source of an Aggregate.
type ClusterStream struct {
	// Cluster is the cluster's name (its relay's RELAY_CLUSTER): 1-63 lower-case letters,
	// digits or '-'. Required, and unique in an Aggregate: the event ids of two clusters of
	// one name could collide, and so would their subjects.
	Cluster string
	// Domain is the JetStream domain of the cluster's NATS servers (the leaf node's
	// jetstream domain), reached through the API prefix $JS.<Domain>.API. Empty with an
	// empty APIPrefix: the stream is in the aggregate's own JetStream.
	Domain string
	// APIPrefix is the JetStream API prefix through which the stream is reached, for a stream
	// in another account that exports its API. Excludes Domain.
	APIPrefix string
	// DeliverPrefix is the subject prefix under which the other account's deliveries of the
	// stream reach the aggregate's account (an import), with APIPrefix; empty: the server's
	// own delivery subjects, enough within one account.
	DeliverPrefix string
	// Stream is the cluster's stream (its relay's RELAY_STREAM); empty means
	// event.DefaultStream(Cluster), the relay's default. A relay upgraded from the former
	// default may still write event.LegacyStream: name it then, since the server keeps
	// retrying a source whose stream does not exist and EnsureAggregate does not look.
	Stream string
}

// Aggregate describes a stream that sources the event streams of several clusters, such as
// the stream on the hub of a fan-in topology (docs/operations.md, "Many clusters").
type Aggregate struct {
	// Name is the aggregate stream's name. Required.
	Name string
	// Sources are the clusters' streams. At least one.
	Sources []ClusterStream
	// Replicas is the stream's replica count; 0 means 1.
	Replicas int
	// Duplicates is the duplicate window; 0 means DefaultAggregateDuplicates. Ids include the
	// cluster, so the window never drops the event of one cluster for another's.
	Duplicates time.Duration
	// MaxAge is how long an event is kept; 0 keeps events until MaxBytes is reached. Set
	// MaxAge or MaxBytes: with neither, the aggregate of every cluster grows without bound.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size, discarding the oldest events past it; 0 is
	// unlimited.
	MaxBytes int64
	// Compression stores the stream S2-compressed.
	Compression bool
}

// source returns the jetstream configuration of one cluster's stream.
func (c ClusterStream) source() jetstream.StreamSource {
	src := jetstream.StreamSource{Name: c.Stream}
	if src.Name == "" {
		src.Name = event.DefaultStream(c.Cluster)
	}
	switch {
	case c.Domain != "":
		src.External = &jetstream.ExternalStream{APIPrefix: "$JS." + c.Domain + ".API"}
	case c.APIPrefix != "":
		src.External = &jetstream.ExternalStream{APIPrefix: c.APIPrefix, DeliverPrefix: c.DeliverPrefix}
	}
	return src
}

// sourceKey identifies a source the way the server tells them apart: the stream's name and
// where it is.
func sourceKey(s jetstream.StreamSource) string {
	if s.External == nil {
		return s.Name
	}
	return s.Name + " via " + s.External.APIPrefix
}

// validate reports every problem with a at once.
func (a Aggregate) validate() error {
	var errs []error
	if a.Name == "" {
		errs = append(errs, errors.New("empty name"))
	}
	if len(a.Sources) == 0 {
		errs = append(errs, errors.New("no sources"))
	}
	clusters := map[string]bool{}
	sources := map[string]bool{}
	for i, c := range a.Sources {
		if err := validateCluster(c.Cluster); err != nil {
			errs = append(errs, fmt.Errorf("source %d: %w", i, err))
		} else if clusters[c.Cluster] {
			errs = append(errs, fmt.Errorf("source %d: cluster %q named twice", i, c.Cluster))
		}
		clusters[c.Cluster] = true
		if c.Domain != "" && c.APIPrefix != "" {
			errs = append(errs, fmt.Errorf("source %d: domain %q and API prefix %q both set", i, c.Domain, c.APIPrefix))
		}
		if c.DeliverPrefix != "" && c.APIPrefix == "" {
			errs = append(errs, fmt.Errorf("source %d: deliver prefix %q without an API prefix", i, c.DeliverPrefix))
		}
		if k := sourceKey(c.source()); sources[k] {
			errs = append(errs, fmt.Errorf("source %d: stream %s named twice", i, k))
		} else {
			sources[k] = true
		}
	}
	if a.Replicas < 0 {
		errs = append(errs, fmt.Errorf("replicas %d: want 0 or more", a.Replicas))
	}
	if a.Duplicates < 0 || a.MaxAge < 0 || a.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("duplicates %s, max age %s, max bytes %d: want 0 or more", a.Duplicates, a.MaxAge, a.MaxBytes))
	}
	if dup := a.duplicates(); a.MaxAge > 0 && dup > a.MaxAge {
		errs = append(errs, fmt.Errorf("duplicates %s: longer than max age %s", dup, a.MaxAge))
	}
	return errors.Join(errs...)
}

func (a Aggregate) duplicates() time.Duration {
	if a.Duplicates == 0 {
		return DefaultAggregateDuplicates
	}
	return a.Duplicates
}

// config returns the configuration of a new aggregate stream.
func (a Aggregate) config() jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{
		Name:        a.Name,
		Description: "kube-nats-relay events of several clusters",
		Storage:     jetstream.FileStorage,
		Replicas:    max(a.Replicas, 1),
		Duplicates:  a.duplicates(),
		MaxAge:      a.MaxAge,
		MaxBytes:    a.MaxBytes,
	}
	if a.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	if a.Compression {
		cfg.Compression = jetstream.S2Compression
	}
	for _, c := range a.Sources {
		cfg.Sources = append(cfg.Sources, ptr(c.source()))
	}
	return cfg
}

func ptr[T any](v T) *T { return &v }

// EnsureAggregate creates the aggregate stream a describes, or makes an existing stream of
// that name source every cluster of a.Sources, and returns it.
//
// The aggregate captures no subjects of its own: it only sources, so a publish on a
// cluster's subjects that reaches the aggregate's servers is never stored twice. Every event
// keeps its subject, headers and id; its sequence in the aggregate is the aggregate's own.
//
// An existing stream keeps its settings and the sources it has, including ones a does not
// name: EnsureAggregate only adds the missing ones (remove a source with the nats CLI or
// jetstream.Stream updates). Calls that run at the same time and name different sources can
// undo each other's additions, each returning success (the server has no compare-and-swap
// for stream configurations): run it from one place, or name every cluster in each call.
//
// It fails with ErrNotAggregate, changing nothing, when the stream captures subjects, mirrors
// a stream, is sealed, or sources one of a's streams with a subject filter, a transform or a
// start position of its own, so that it would not hold every event of that cluster.
func EnsureAggregate(ctx context.Context, js jetstream.JetStream, a Aggregate) (jetstream.Stream, error) {
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("aggregate stream %q: %w", a.Name, err)
	}
	want := a.config()
	for attempt := 1; ; attempt++ {
		s, err := js.Stream(ctx, a.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && attempt < ensureAttempts {
				continue // created meanwhile by another: check that one
			}
			if err != nil {
				return nil, fmt.Errorf("create aggregate stream %q: %w", a.Name, err)
			}
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("aggregate stream %q: %w", a.Name, err)
		}
		have := s.CachedInfo().Config
		missing, err := missingSources(have, want.Sources)
		if err != nil {
			return nil, fmt.Errorf("aggregate stream %q: %w", a.Name, err)
		}
		if len(missing) == 0 {
			return s, nil
		}
		if attempt > ensureAttempts {
			return nil, fmt.Errorf("aggregate stream %q: sources %q still missing after %d updates: another writer keeps changing it",
				a.Name, keys(missing), ensureAttempts)
		}
		have.Sources = append(have.Sources, missing...)
		if _, err := js.UpdateStream(ctx, have); err != nil {
			return nil, fmt.Errorf("aggregate stream %q: add sources %q: %w", a.Name, keys(missing), err)
		}
		// Read it again: a concurrent update may have replaced the sources just added.
	}
}

// missingSources returns the sources of want that have does not have, or ErrNotAggregate when
// have cannot be an aggregate of them.
func missingSources(have jetstream.StreamConfig, want []*jetstream.StreamSource) ([]*jetstream.StreamSource, error) {
	var errs []error
	if len(have.Subjects) > 0 {
		errs = append(errs, fmt.Errorf("%w: it captures subjects %q", ErrNotAggregate, have.Subjects))
	}
	if have.Mirror != nil {
		errs = append(errs, fmt.Errorf("%w: it mirrors stream %s", ErrNotAggregate, sourceKey(*have.Mirror)))
	}
	if have.Sealed {
		errs = append(errs, fmt.Errorf("%w: it is sealed", ErrNotAggregate))
	}
	var missing []*jetstream.StreamSource
	for _, w := range want {
		i := slices.IndexFunc(have.Sources, func(h *jetstream.StreamSource) bool { return sourceKey(*h) == sourceKey(*w) })
		if i < 0 {
			missing = append(missing, w)
			continue
		}
		if h := have.Sources[i]; h.FilterSubject != "" || len(h.SubjectTransforms) > 0 || h.OptStartSeq > 0 || h.OptStartTime != nil {
			errs = append(errs, fmt.Errorf("%w: it sources %s with filter %q, %d transforms, start sequence %d, start time %v, not every event",
				ErrNotAggregate, sourceKey(*w), h.FilterSubject, len(h.SubjectTransforms), h.OptStartSeq, h.OptStartTime))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return missing, nil
}

func keys(sources []*jetstream.StreamSource) []string {
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = sourceKey(*s)
	}
	return out
}

package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// publishedLookupTimeout bounds one read of the stream before an inferred delete: a
	// stream that cannot answer within it is treated as not holding the delete (see
	// deletePublished).
	publishedLookupTimeout = 5 * time.Second
	// publishedLookupPause is how long reads of the stream are skipped after one failed, so
	// that a relist of many deletes does not wait publishedLookupTimeout for each while NATS
	// is down or the relay's user may not read the stream.
	publishedLookupPause = time.Minute
)

// PublishedLog reads what the stream already holds, to settle what a crash can leave open: an
// event acknowledged by JetStream whose index record was never written.
type PublishedLog interface {
	// LastHeader returns the headers of the last message on subject, which may hold
	// wildcards; ok is false when the stream holds none.
	LastHeader(ctx context.Context, subject string) (h nats.Header, ok bool, err error)
}

// StreamLog is the PublishedLog of a JetStream stream.
type StreamLog struct {
	Stream jetstream.Stream
}

var _ PublishedLog = StreamLog{}

// LastHeader returns the headers of the stream's last message on subject.
func (l StreamLog) LastHeader(ctx context.Context, subject string) (nats.Header, bool, error) {
	m, err := l.Stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("last message on %s: %w", subject, err)
	}
	return m.Header, true, nil
}

// deletePublished reports whether the delete of the indexed object prev (key's uid) was
// published already: the last event on the object's subjects, of any type, is a delete of that
// uid. A delete is published before its index record is written (see ObjectIndex), so a relay
// killed between the two finds the object gone but still indexed; without this look-up the
// relist would publish a second delete, inferred, with the older indexed resourceVersion and
// therefore another id. The look-up does not depend on the duplicate window, only on the
// stream still holding the event (its max age and limits). It returns the id of that delete.
//
// When the stream cannot be read (no PublishedLog, an error, a timeout, or within
// publishedLookupPause of a failed read) it reports false: the inferred delete is then
// published, at worst a second time, never lost.
func (in *intake) deletePublished(ctx context.Context, meta event.Meta) (id string, published bool) {
	if in.src.published == nil {
		return "", false
	}
	f := event.Filter{Prefix: in.src.cfg.Prefix, Cluster: meta.Cluster, Group: meta.Group,
		Version: meta.Version, Resource: meta.Resource, Namespace: meta.Namespace, ClusterScoped: meta.Namespace == "", Name: meta.Name}
	h, ok, err := in.lookup(ctx, f.String(), metaKey(meta))
	if err != nil || !ok {
		return "", false
	}
	last, err := event.MetaFromHeader(h)
	if err != nil || last.Type != event.Deleted || last.UID != meta.UID {
		return "", false
	}
	return h.Get(nats.MsgIdHdr), true
}

// errLookupPaused is lookup's error within publishedLookupPause of a failed read.
var errLookupPaused = errors.New("reads of the stream paused after a failure")

// lookup reads the headers of the stream's last message on subject, for the object key,
// within publishedLookupTimeout; after a failure it logs once and fails every look-up for
// publishedLookupPause.
func (in *intake) lookup(ctx context.Context, subject, key string) (nats.Header, bool, error) {
	if in.src.clock.Since(in.publishedFailed) < publishedLookupPause {
		return nil, false, errLookupPaused
	}
	ctx, cancel := context.WithTimeout(ctx, publishedLookupTimeout)
	defer cancel()
	h, ok, err := in.src.published.LastHeader(ctx, subject)
	if err != nil {
		in.publishedFailed = in.src.clock.Now()
		in.log.Warn().Err(err).Str("key", key).Stringer("pause", publishedLookupPause).
			Msg("could not read the stream before an inferred delete or a derived event: publishing them without looking (at worst a second time)")
		return nil, false, err
	}
	return h, ok, nil
}

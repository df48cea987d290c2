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
	// LastMessage returns the headers and body of the last message on subject, which may
	// hold wildcards; ok is false when the stream holds none.
	LastMessage(ctx context.Context, subject string) (h nats.Header, data []byte, ok bool, err error)
}

// StreamLog is the PublishedLog of a JetStream stream.
type StreamLog struct {
	Stream jetstream.Stream
}

var _ PublishedLog = StreamLog{}

// LastMessage returns the headers and body of the stream's last message on subject.
func (l StreamLog) LastMessage(ctx context.Context, subject string) (nats.Header, []byte, bool, error) {
	m, err := l.Stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("last message on %s: %w", subject, err)
	}
	return m.Header, m.Data, true, nil
}

// deletePublished reports whether the delete of the indexed object prev (key's uid) was
// published already: the last event on the object's subjects, of any type, is a delete of that
// uid. A delete is published before its index record is written (see ObjectIndex), so a relay
// killed between the two finds the object gone but still indexed; without this look-up the
// relist would publish a second delete, inferred, with the older indexed resourceVersion and
// therefore another id. The look-up does not depend on the duplicate window, only on the
// stream still holding the event (its max age and limits). It returns that delete: its
// headers and body, so that the delete's derived events, which a crash may have kept
// from being published, are derived from what the delete carried.
//
// When the stream cannot be read (no PublishedLog, an error, a timeout, or within
// publishedLookupPause of a failed read) it reports false: the inferred delete is then
// published, at worst a second time, never lost.
func (in *intake) deletePublished(ctx context.Context, meta event.Meta) (h nats.Header, body []byte, published bool) {
	if in.src.published == nil {
		return nil, nil, false
	}
	f := event.Filter{Prefix: in.src.cfg.Prefix, Cluster: meta.Cluster, Group: meta.Group,
		Version: meta.Version, Resource: meta.Resource, Namespace: meta.Namespace, ClusterScoped: meta.Namespace == "", Name: meta.Name}
	h, body, ok, err := in.read(ctx, f.String(), metaKey(meta), NoteStreamReadDelete)
	if err != nil || !ok {
		return nil, nil, false
	}
	last, err := event.MetaFromHeader(h)
	if err != nil || last.Type != event.Deleted || last.UID != meta.UID {
		return nil, nil, false
	}
	return h, body, true
}

// errLookupPaused is lookup's error within publishedLookupPause of a failed read.
var errLookupPaused = errors.New("reads of the stream paused after a failure")

// lookup reads the headers of the stream's last message on subject, for the object key (see
// read).
func (in *intake) lookup(ctx context.Context, subject, key string, purpose Note) (nats.Header, bool, error) {
	h, _, ok, err := in.read(ctx, subject, key, purpose)
	return h, ok, err
}

// read reads the stream's last message on subject, for the object key, within
// publishedLookupTimeout; after a failure it logs once and fails every read for
// publishedLookupPause. Each read is counted as purpose (a NoteStreamRead note).
func (in *intake) read(ctx context.Context, subject, key string, purpose Note) (nats.Header, []byte, bool, error) {
	if in.src.clock.Since(in.publishedFailed) < publishedLookupPause {
		return nil, nil, false, errLookupPaused
	}
	ctx, cancel := context.WithTimeout(ctx, publishedLookupTimeout)
	defer cancel()
	in.src.note(purpose)
	h, body, ok, err := in.src.published.LastMessage(ctx, subject)
	if err != nil {
		in.publishedFailed = in.src.clock.Now()
		in.log.Warn().Err(err).Str("key", key).Stringer("pause", publishedLookupPause).
			Msg("could not read the stream before an inferred delete or a derived event: publishing them without looking (at worst a second time)")
		return nil, nil, false, err
	}
	return h, body, ok, nil
}

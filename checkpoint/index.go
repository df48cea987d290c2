package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/event"
)

// purgeMarkerTTL is how long the marker of a removed index entry lives. The purge removes
// the entry's history at once; the marker only tells watchers of the bucket that the key went
// away, so it need not outlive any watcher's catch-up.
const purgeMarkerTTL = 15 * time.Minute

// IndexConfig is the bucket the object index is kept in.
type IndexConfig struct {
	// Bucket is the KV bucket name.
	Bucket string
	// Replicas is the bucket's replica count when the index creates it.
	Replicas int
}

// Index is the durable per-object index: for every object a source published, the uid and
// resourceVersion of the last published change. Per source it is a journal (see Journal): a
// snapshot written as chunks and named by a head, then segments, each one value holding the
// records of many objects, read in order, last write wins. A record is an object key and a
// value. Keys are namespace and name written with event.NamespaceKeyToken and
// event.KeyToken. Values are "<uid> <resourceVersion>" when the key decodes back to the object
// and no state condition of a derived event holds; otherwise the JSON object {"uid",
// "resourceVersion", "object" (base64 of "namespace/name", when namespace or name is too long
// and the key is in the hashed form, so that Load still returns the exact object), "held" (the
// names of the derived events whose state condition held at the recorded change)}; an empty
// value removes the object. A value written before derived events existed loads as none held.
//
// Releases before the journal kept one bucket key per object, <source>.<namespace>.<name> (the
// source key with its dots replaced by '/'), with the same values. Load reads those keys too,
// writes them into a snapshot and removes them (see Load).
type Index struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	prefix   string // subject prefix of a write of the bucket's keys (kvPutPrefix)
	maxSeg   int    // bytes of a segment's value
	maxChunk int    // bytes of a snapshot chunk's value
	// hook, set by tests, is called before each step of a snapshot; an error cuts it short.
	hook func(step string) error

	// issued is, per source, the highest segment number a journal of this index handed out.
	// A source loaded again in the same process (after a stop, or leading again) may still
	// have segments of its previous journal in flight, not yet in the bucket: the new
	// journal numbers its segments after them, so that none overwrites another.
	issuedMu sync.Mutex
	issued   map[string]uint64
}

// issue records that source's journal handed out segment n.
func (ix *Index) issue(source string, n uint64) {
	ix.issuedMu.Lock()
	defer ix.issuedMu.Unlock()
	if ix.issued == nil {
		ix.issued = map[string]uint64{}
	}
	ix.issued[source] = max(ix.issued[source], n)
}

func (ix *Index) lastIssued(source string) uint64 {
	ix.issuedMu.Lock()
	defer ix.issuedMu.Unlock()
	return ix.issued[source]
}

// OpenIndex returns the index over the bucket, creating it when missing.
func OpenIndex(ctx context.Context, js jetstream.JetStream, cfg IndexConfig) (*Index, error) {
	kv, prefix, err := openTTLBucket(ctx, js, cfg.Bucket, "kube-nats-relay object index: uid and resourceVersion last published per object", cfg.Replicas, nil)
	if err != nil {
		return nil, err
	}
	ix := &Index{js: js, kv: kv, prefix: prefix, maxSeg: segmentMaxBytes, maxChunk: chunkMaxBytes}
	limit := int64(0)
	if nc := js.Conn(); nc != nil {
		limit = nc.MaxPayload()
	}
	if status, err := kv.Status(ctx); err == nil {
		if s, ok := status.(*jetstream.KeyValueBucketStatus); ok && s.StreamInfo().Config.MaxMsgSize > 0 {
			limit = min(limit, int64(s.StreamInfo().Config.MaxMsgSize))
		}
	}
	if limit > 0 {
		// A quarter of a small limit is left for the headers instead of valueHeadroom, so
		// that a segment still holds several records.
		fit := int(limit - min(valueHeadroom, limit/4))
		ix.maxSeg = min(ix.maxSeg, fit)
		ix.maxChunk = min(ix.maxChunk, fit)
	}
	return ix, nil
}

// Load calls fn for every object recorded under source, and returns the journal that records
// the source's changes from now on. held names the state conditions of derived events that
// held at the object's last recorded change (nil when none).
//
// Keys of an older relay (one per object) are read too: when they are newer than every head
// and segment (an older relay ran after this one), they are applied over the journal; older
// ones were already written into a snapshot. Either way Load then writes the result as a new
// snapshot and removes them. A crash at any step leaves a bucket that loads the same.
func (ix *Index) Load(ctx context.Context, source string, fn func(object, uid, rv string, held []string)) (*Journal, error) {
	tok, legacyTok := journalToken(source), sourceToken(source)
	st, err := readJournal(ctx, ix.kv, tok, legacyTok)
	if err != nil {
		return nil, fmt.Errorf("load index of %s: %w", source, err)
	}
	last := st.last()
	objects, written, err := st.fold(last)
	if err != nil {
		return nil, fmt.Errorf("load index of %s: %w", source, err)
	}
	j := &Journal{js: ix.js, kv: ix.kv, prefix: ix.prefix, recPrefix: ix.prefix + legacyTok + ".", tok: tok,
		maxSeg: ix.maxSeg, maxChunk: ix.maxChunk, hook: ix.hook,
		next: max(last, ix.lastIssued(source)) + 1, issue: func(n uint64) { ix.issue(source, n) }, open: map[uint64]bool{}, gen: st.head.Generation, through: st.head.Through, headRev: st.headRev,
		objects: len(objects), written: written, compactC: make(chan struct{}, 1)}
	if len(st.legacy) > 0 {
		var subjects []string
		for _, e := range st.legacy {
			subjects = append(subjects, j.recPrefix+e.key)
			if e.revision <= st.rev {
				continue // in a snapshot already
			}
			objects[e.key] = e.value
		}
		// The legacy keys go into a snapshot through every segment, and only then away.
		if err := j.snapshot(ctx, st, last, objects, subjects); err != nil {
			return nil, fmt.Errorf("load index of %s: move per-object keys into a snapshot: %w", source, err)
		}
		j.written = 0
	}
	for k, v := range objects {
		object, ent, err := decodeEntry(k, []byte(v))
		if err != nil {
			return nil, fmt.Errorf("load index of %s: key %q: %w", source, k, err)
		}
		fn(object, ent.UID, ent.ResourceVersion, ent.Held)
	}
	if j.written > max(j.objects, compactMinRecords) {
		j.compactC <- struct{}{}
	}
	return j, nil
}

// Record returns the record of object's last published change (uid at rv, with the derived
// events' state conditions that held, held), or of its removal when uid is empty, for the
// source's Journal (Write), after the event's own ack. As a message it is also the per-object
// key of releases before the journal (which Load reads and moves into a snapshot).
func (ix *Index) Record(source, object, uid, rv string, held []string) *nats.Msg {
	key := objectKey(object)
	subject := ix.prefix + sourceToken(source) + "." + key
	if uid == "" {
		return purgeMsg(subject)
	}
	m := nats.NewMsg(subject)
	m.Data = encodeEntry(key, object, uid, rv, held)
	return m
}

// jsonEntry is the value of an index entry in the JSON form: for a key in the hashed form,
// which cannot be decoded, the value names the object; Object is "namespace/name" (or
// "name"), as bytes (base64 in JSON) so that any byte survives, and is left out for a key
// that decodes. Held names the state conditions that held.
type jsonEntry struct {
	UID             string   `json:"uid"`
	ResourceVersion string   `json:"resourceVersion"`
	Object          []byte   `json:"object,omitempty"`
	Held            []string `json:"held,omitempty"`
}

// encodeEntry returns the value recorded under key for object: "<uid> <rv>" when the key
// decodes back to object and nothing is held, the JSON jsonEntry otherwise.
func encodeEntry(key, object, uid, rv string, held []string) []byte {
	e := jsonEntry{UID: uid, ResourceVersion: rv, Held: held}
	switch {
	case keyHashed(key):
		e.Object = []byte(object)
	case len(held) == 0:
		return []byte(uid + " " + rv)
	}
	v, _ := json.Marshal(e) // always encodes
	return v
}

// decodeEntry reads an entry from its key (after the source token) and value. A hashed key's
// value must name an object whose key is that key.
func decodeEntry(key string, value []byte) (object string, e jsonEntry, err error) {
	if !keyHashed(key) {
		object, err := objectFromKey(key)
		if err != nil {
			return "", e, err
		}
		if len(value) > 0 && value[0] == '{' { // a uid never starts with '{'
			if err := json.Unmarshal(value, &e); err != nil || e.Object != nil {
				return "", jsonEntry{}, fmt.Errorf("bad value %q", value)
			}
			return object, e, nil
		}
		uid, rv, ok := strings.Cut(string(value), " ")
		if !ok {
			return "", e, fmt.Errorf("bad value %q", value)
		}
		return object, jsonEntry{UID: uid, ResourceVersion: rv}, nil
	}
	if err := json.Unmarshal(value, &e); err != nil {
		return "", jsonEntry{}, fmt.Errorf("hashed key: bad value %q: %w", value, err)
	}
	if got := objectKey(string(e.Object)); got != key {
		return "", jsonEntry{}, fmt.Errorf("hashed key: value names object %q, whose key is %q", e.Object, got)
	}
	return string(e.Object), e, nil
}

// openTTLBucket opens the one-value-per-key bucket, creating it when missing, with
// per-message TTLs so that the markers of purged keys expire (purgeMarkerTTL) instead of one
// marker per removed object staying forever. It also returns the subject prefix the bucket's
// keys are written under through js (kvPutPrefix).
func openTTLBucket(ctx context.Context, js jetstream.JetStream, bucket, description string, replicas int, metadata map[string]string) (jetstream.KeyValue, string, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         bucket,
			Description:    description,
			Storage:        jetstream.FileStorage,
			Replicas:       max(replicas, 1),
			History:        1,
			LimitMarkerTTL: purgeMarkerTTL,
			Metadata:       metadata,
		})
	}
	if err != nil {
		return nil, "", fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	s, ok := status.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil, "", fmt.Errorf("open bucket %s: status of type %T lacks the bucket's stream", bucket, status)
	}
	if !s.StreamInfo().Config.AllowMsgTTL {
		return nil, "", fmt.Errorf("%w: bucket %s exists without per-message TTL (create it with a limit marker TTL, nats-server 2.11 or later)", ErrBucketUnusable, bucket)
	}
	if err := checkLimits(ctx, kv, bucket, smallestRecord(), true); err != nil {
		return nil, "", err
	}
	return kv, kvPutPrefix(js.Options(), s.StreamInfo().Config), nil
}

// purgeMsg returns the message that purges subject's key, leaving a marker that expires.
func purgeMsg(subject string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Header.Set(jetstream.MsgTTLHeader, purgeMarkerTTL.String())
	return m
}

// sourceToken turns a source key into one KV key token.
func sourceToken(source string) string { return strings.ReplaceAll(source, ".", "/") }

// objectKey writes "namespace/name" (or "name") as two key tokens: namespace ("_" for
// cluster-scoped objects, event.NamespaceKeyToken) and name (event.KeyToken). Either may be
// in the hashed form, which bounds the key whatever the object's name.
func objectKey(object string) string {
	ns, name, ok := strings.Cut(object, "/")
	if !ok {
		ns, name = "", object
	}
	return event.NamespaceKeyToken(ns) + "." + event.KeyToken(name)
}

// keyHashed reports whether an object key has a token in the hashed form.
func keyHashed(key string) bool { return event.IsHashedKeyToken(key) }

// objectFromKey reverses objectKey for a key without a hashed token.
func objectFromKey(key string) (string, error) {
	nsTok, nameTok, ok := strings.Cut(key, ".")
	if !ok {
		return "", errors.New("want <namespace>.<name>")
	}
	name, err := event.DecodeKeyToken(nameTok)
	if err != nil {
		return "", err
	}
	if nsTok == "_" {
		return name, nil
	}
	ns, err := event.DecodeKeyToken(nsTok)
	if err != nil {
		return "", err
	}
	return ns + "/" + name, nil
}

// SegmentSubjects returns the prefix of the subjects source's journal segments are written on
// through this index, for tools and fault tests that watch or hold them back.
func (ix *Index) SegmentSubjects(source string) string {
	return ix.prefix + journalToken(source) + ".s."
}

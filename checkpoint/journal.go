package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// segmentMaxBytes bounds a segment's value: large enough that a segment carries hundreds
	// of records (one JetStream write instead of one per record), far below nats-server's
	// default max_payload (1 MiB), so that a segment is never refused as too large. A record
	// larger than that (an object name of many kilobytes) goes alone in its segment.
	segmentMaxBytes = 64 << 10
	// chunkMaxBytes bounds a snapshot chunk's value, for the same reasons; chunks are written
	// rarely, so a larger value costs nothing per change.
	chunkMaxBytes = 256 << 10
	// valueHeadroom is left below a bucket's max value size and the server's max payload for
	// the headers JetStream counts with the value.
	valueHeadroom = 1 << 10
	// compactMinRecords is the fewest records written since the last snapshot that start a
	// compaction (with a smaller index, more records than objects): below it, reading the
	// segments at start costs less than writing snapshots often.
	compactMinRecords = 4096
	// purgeWindow bounds the removals of a snapshot awaiting their acks: enough to hide the
	// round trip, few enough to stay far below the client's limit of pending publishes.
	purgeWindow = 64
	// segmentsInFlight bounds a source's segments awaiting their acks. Records written while
	// every one is in flight wait and go out together when one is answered (group commit):
	// a few in flight keep a record's wait for its segment near one round trip when the
	// server is slow; more would only make the segments smaller.
	segmentsInFlight = 4
)

// Journal writes one source's index records, many objects' records together as one value of
// the index bucket (a segment), and compacts the segments into a snapshot from time to time.
// Write is asynchronous: a record is durable when its done func is called with nil. A few
// segments are in flight at a time (segmentsInFlight); records written while they are wait
// and go out together when one is answered (group commit), so a busy source writes few large
// segments and a quiet one writes each record after one round trip.
type Journal struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	prefix string // subject prefix of the bucket's keys
	// recPrefix is the subject prefix of the source's records made by Index.Record.
	recPrefix string
	tok       string // the journal's first key token (journalToken)
	maxSeg    int    // bytes of a segment's value
	maxChunk  int    // bytes of a snapshot chunk's value
	hook      func(step string) error
	// issue, when set, is told every segment number handed out (see Index.issued).
	issue func(n uint64)
	// watchDenial, when set, reports a segment's publish denied (see WatchDenials).
	watchDenial func(subject string) (<-chan error, func())

	mu       sync.Mutex
	queue    []pendingRecord
	next     uint64          // number of the next segment
	inflight int             // segments in flight
	open     map[uint64]bool // segments sent and not answered
	// gen and through name the last snapshot: its generation and the last segment in it.
	gen, through uint64
	// headRev is the revision of the head this journal loaded or last wrote (0: none).
	headRev uint64
	// objects is how many objects the index held at the last load or snapshot; written counts
	// the records of acknowledged segments after through.
	objects, written int
	// retryAt is the written count a compaction waits for after one failed; failures counts
	// the compactions failed in a row (only the first is logged).
	retryAt, failures int
	compactC          chan struct{}
}

// pendingRecord is a record waiting for its segment: key and value as in the per-object form
// (value "" removes), and who to tell once its segment is answered.
type pendingRecord struct {
	key, value string
	done       func(error)
}

// segment is a group of records written as one value.
type segment struct {
	n       uint64
	records []pendingRecord
}

// Write makes rec (a message made by Index.Record for this journal's source) durable together
// with the records written around it, and calls done once: with nil when the segment holding
// it is acknowledged, with the error otherwise (the caller writes it again, later records of
// the object only after that). done may be called before Write returns.
func (j *Journal) Write(rec *nats.Msg, done func(error)) {
	key, ok := strings.CutPrefix(rec.Subject, j.recPrefix)
	if !ok || key == "" {
		done(fmt.Errorf("index record on %q is not one of source %s", rec.Subject, j.tok))
		return
	}
	value := string(rec.Data)
	if rec.Header.Get("KV-Operation") == "PURGE" {
		value = ""
	} else if value == "" {
		done(fmt.Errorf("index record of %q has no value", key))
		return
	}
	j.mu.Lock()
	j.queue = append(j.queue, pendingRecord{key: key, value: value, done: done})
	var seg *segment
	if j.inflight < segmentsInFlight {
		seg = j.takeLocked()
	}
	j.mu.Unlock()
	if seg != nil {
		j.send(seg)
	}
}

// takeLocked takes the records of the next segment from the queue: at least one, then as
// many as fit maxSeg.
func (j *Journal) takeLocked() *segment {
	size, n := 2, 0
	for n < len(j.queue) {
		r := j.queue[n]
		size += encodedSize(r.key, r.value)
		if n > 0 && size > j.maxSeg {
			break
		}
		n++
	}
	seg := j.numberLocked(j.queue[:n:n])
	j.queue = j.queue[n:]
	if len(j.queue) == 0 {
		j.queue = nil
	}
	return seg
}

// numberLocked makes records the next segment, in flight.
func (j *Journal) numberLocked(records []pendingRecord) *segment {
	seg := &segment{n: j.next, records: records}
	if j.issue != nil {
		j.issue(seg.n)
	}
	j.next++
	j.inflight++
	j.open[seg.n] = true
	return seg
}

// tooLarge reports whether err refuses a value as larger than the server's max payload or
// the bucket's max value size.
func tooLarge(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	return api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum ||
		(api.ErrorCode == jsErrStoreFailed && strings.Contains(strings.ToLower(api.Description), "message too large"))
}

// wrongLast reports whether err refuses a write because the key was written meanwhile (or,
// for a create, exists).
func wrongLast(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) &&
		(api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// jsErrStoreFailed is nats-server's "store failed" error code, whose description says why.
const jsErrStoreFailed jetstream.ErrorCode = 10077

// send publishes seg and answers it when the server does.
func (j *Journal) send(seg *segment) {
	flat := make([]string, 0, 2*len(seg.records))
	for _, r := range seg.records {
		flat = append(flat, r.key, r.value)
	}
	m := nats.NewMsg(j.prefix + segmentKey(j.tok, seg.n))
	m.Data, _ = json.Marshal(flat) // strings always encode
	// Create-only: a segment of that number written by another journal of the source (a
	// second relay, a late write of an old leader) is a conflict, never overwritten.
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	j.mu.Lock()
	watch := j.watchDenial
	j.mu.Unlock()
	denied, cancel := (<-chan error)(nil), func() {}
	if watch != nil {
		denied, cancel = watch(m.Subject)
	}
	fut, err := j.js.PublishMsgAsync(m)
	if err != nil {
		cancel()
		j.answer(seg, err)
		return
	}
	go func() {
		defer cancel()
		select {
		case <-fut.Ok():
			j.answer(seg, nil)
		case err := <-fut.Err():
			j.answer(seg, err)
		case err := <-denied:
			// The server sends no reply to a denied publish: the future only times out.
			j.answer(seg, err)
		}
	}()
}

// WatchDenials makes the journal fail a segment as soon as the server refuses its publish
// with a permissions violation, which reaches the client only as an asynchronous error:
// watch registers a publish to subject and returns the channel that receives the denial and
// a func to call once the publish has its outcome. Call it before the first Write.
func (j *Journal) WatchDenials(watch func(subject string) (denied <-chan error, cancel func())) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.watchDenial = watch
}

// SegmentError is the error a segment's records are answered with: every record of the
// segment gets the same one, so that a caller reports a refusal once per segment.
type SegmentError struct {
	Subject string // the segment's subject
	Records int    // how many records the segment held
	Err     error
}

func (e *SegmentError) Error() string {
	return fmt.Sprintf("write index segment %s (%d records): %v", e.Subject, e.Records, e.Err)
}

// Unwrap returns the cause.
func (e *SegmentError) Unwrap() error { return e.Err }

// Segment returns the segment's subject and how many records it held.
func (e *SegmentError) Segment() (subject string, records int) { return e.Subject, e.Records }

// answer reports seg's outcome to its records, sends the next segment and asks for a
// compaction when the segments since the snapshot outgrow the index. A segment of several
// records refused as too large (a bucket or server limit lower than the journal measured) is
// split in two, each sent again as a new segment, down to one record a segment: a record
// is given up only when it alone is too large.
func (j *Journal) answer(seg *segment, err error) {
	j.mu.Lock()
	delete(j.open, seg.n)
	j.inflight--
	if wrongLast(err) {
		err = fmt.Errorf("write index segment %d of %s: %w", seg.n, j.tok, conflictError{what: "index segment"})
	}
	if len(seg.records) > 1 && tooLarge(err) {
		half := len(seg.records) / 2
		first, second := j.numberLocked(seg.records[:half]), j.numberLocked(seg.records[half:])
		j.mu.Unlock()
		j.send(first)
		j.send(second)
		return
	}
	if err == nil {
		j.written += len(seg.records)
	}
	if err != nil {
		err = &SegmentError{Subject: j.prefix + segmentKey(j.tok, seg.n), Records: len(seg.records), Err: err}
	}
	var next *segment
	if len(j.queue) > 0 && j.inflight < segmentsInFlight {
		next = j.takeLocked()
	}
	compact := j.written > max(j.objects, compactMinRecords) && j.written >= j.retryAt
	j.mu.Unlock()
	for _, r := range seg.records {
		r.done(err)
	}
	if next != nil {
		j.send(next)
	}
	if compact {
		select {
		case j.compactC <- struct{}{}:
		default:
		}
	}
}

// encodedSize is what a record adds to a segment's or chunk's JSON, exactly: both strings
// as encoding/json writes them (escapes included) and a comma after each. It runs for every
// record a segment takes, so the usual record (keys and "<uid> <rv>" values of plain ASCII)
// is measured without encoding it.
func encodedSize(key, value string) int {
	return jsonStringLen(key) + jsonStringLen(value) + 2
}

// jsonStringLen is len(json.Marshal(s)): the string and its quotes when every byte is
// printable ASCII that encoding/json writes as it is; otherwise what encoding/json writes.
func jsonStringLen(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			b, _ := json.Marshal(s) // strings always encode
			return len(b)
		}
	}
	return len(s) + 2
}

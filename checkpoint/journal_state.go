package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// journalMark starts the first key token of a source's journal. No source token starts with
// '=' (a source key starts with the cluster name, a DNS label), so an older relay, which loads
// <source token>.>, never reads the journal, and one source's journal never matches another's.
const journalMark = "=j/"

// head names the snapshot a loader starts from: its generation, how many chunks it has, the
// last segment it includes and how many objects it holds.
type head struct {
	// Format is the journal's format version (headFormat); a head of a later format than
	// this relay knows is refused instead of misread.
	Format     int    `json:"format,omitempty"`
	Generation uint64 `json:"generation"`
	// Writer names the snapshot's chunks (chunkKey), so that two journals writing the same
	// generation never overwrite each other's chunks; empty in the first format.
	Writer  string `json:"writer,omitempty"`
	Chunks  int    `json:"chunks"`
	Through uint64 `json:"through"`
	Objects int    `json:"objects"`
}

// journalToken is the first key token of source's journal.
func journalToken(source string) string { return journalMark + sourceToken(source) }

func headKey(tok string) string { return tok + ".head" }

func segmentKey(tok string, n uint64) string { return tok + ".s." + strconv.FormatUint(n, 10) }

func chunkKey(tok string, gen uint64, writer string, i int) string {
	k := tok + ".c." + strconv.FormatUint(gen, 10) + "."
	if writer != "" {
		k += writer + "."
	}
	return k + strconv.Itoa(i)
}

// parseChunkKey reads "c.<gen>.<writer>.<i>", or "c.<gen>.<i>" of the first format (a chunk
// key after the journal token).
func parseChunkKey(k string) (gen uint64, writer string, i int, ok bool) {
	parts := strings.Split(k, ".")
	switch {
	case len(parts) == 4 && parts[0] == "c" && parts[2] != "":
		writer = parts[2]
		parts = []string{parts[0], parts[1], parts[3]}
	case len(parts) != 3 || parts[0] != "c":
		return 0, "", 0, false
	}
	gen, err1 := strconv.ParseUint(parts[1], 10, 64)
	i, err2 := strconv.Atoi(parts[2])
	return gen, writer, i, err1 == nil && err2 == nil && i >= 0
}

// headFormat is the format version this relay writes and reads: 1 added Format and Writer.
const headFormat = 1

// newChunkWriter returns a random key token naming one snapshot's chunks.
func newChunkWriter() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// legacyEntry is a per-object key as an older relay wrote it.
type legacyEntry struct {
	key      string // after the source token
	value    string
	revision uint64
}

// journalState is what a source's keys in the bucket hold: the head, the chunks (keyed after
// the journal token), the segments by number, the per-object keys of an older relay, and the
// highest revision of the head and the segments.
type journalState struct {
	head     head
	headRev  uint64
	chunks   map[string][]byte
	segments map[uint64][]byte
	legacy   []legacyEntry
	rev      uint64
}

// readJournal reads the keys of the journal tok and, when legacyTok is set, the per-object
// keys under it.
func readJournal(ctx context.Context, kv jetstream.KeyValue, tok, legacyTok string) (*journalState, error) {
	filters := []string{tok + ".>"}
	if legacyTok != "" {
		filters = append(filters, legacyTok+".>")
	}
	w, err := kv.WatchFiltered(ctx, filters, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read index %s: %w", tok, err)
	}
	defer w.Stop()
	st := &journalState{chunks: map[string][]byte{}, segments: map[uint64][]byte{}}
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case u, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("read index %s: watcher closed", tok)
			}
			if u == nil {
				return st, nil // every current value delivered
			}
			e = u
		}
		k, ours := strings.CutPrefix(e.Key(), tok+".")
		switch {
		case !ours:
			st.legacy = append(st.legacy, legacyEntry{key: strings.TrimPrefix(e.Key(), legacyTok+"."), value: string(e.Value()), revision: e.Revision()})
		case k == "head":
			if err := json.Unmarshal(e.Value(), &st.head); err != nil {
				return nil, fmt.Errorf("read index %s: head %q: %w", tok, e.Value(), err)
			}
			if st.head.Format > headFormat {
				return nil, fmt.Errorf("read index %s: head of format %d, newer than this relay's %d", tok, st.head.Format, headFormat)
			}
			st.headRev, st.rev = e.Revision(), max(st.rev, e.Revision())
		case strings.HasPrefix(k, "s."):
			n, err := strconv.ParseUint(k[2:], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("read index %s: segment key %q: %w", tok, k, err)
			}
			st.segments[n] = e.Value()
			st.rev = max(st.rev, e.Revision())
		default:
			if _, _, _, ok := parseChunkKey(k); !ok {
				// A key of a later release's kind: skipped, so that the source still loads.
				zerolog.Ctx(ctx).Warn().Str("journal", tok).Str("key", k).Msg("unknown index key ignored")
				continue
			}
			st.chunks[k] = e.Value()
		}
	}
}

// last is the number of the last segment in the bucket, or the head's through when higher.
func (st *journalState) last() uint64 {
	n := st.head.Through
	for s := range st.segments {
		n = max(n, s)
	}
	return n
}

// fold applies, last write wins: the head's chunks, then the segments after the head's through
// up to through, in order. It returns the objects (key -> value) and how many records the
// segments held.
func (st *journalState) fold(through uint64) (map[string]string, int, error) {
	objects := make(map[string]string, st.head.Objects)
	for i := range st.head.Chunks {
		k := chunkKey("", st.head.Generation, st.head.Writer, i)[1:]
		v, ok := st.chunks[k]
		if !ok {
			return nil, 0, fmt.Errorf("index snapshot %d lacks chunk %d of %d", st.head.Generation, i, st.head.Chunks)
		}
		if _, err := apply(objects, v); err != nil {
			return nil, 0, fmt.Errorf("index snapshot %d chunk %d: %w", st.head.Generation, i, err)
		}
	}
	var ns []uint64
	for n := range st.segments {
		if n > st.head.Through && n <= through {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	records := 0
	for _, n := range ns {
		c, err := apply(objects, st.segments[n])
		if err != nil {
			return nil, 0, fmt.Errorf("index segment %d: %w", n, err)
		}
		records += c
	}
	return objects, records, nil
}

// apply reads a segment's or chunk's value (key, value pairs; value "" removes) into objects
// and returns how many records it held.
func apply(objects map[string]string, data []byte) (int, error) {
	var flat []string
	if err := json.Unmarshal(data, &flat); err != nil || len(flat)%2 != 0 {
		return 0, fmt.Errorf("bad value %.80q", data)
	}
	for i := 0; i < len(flat); i += 2 {
		if flat[i+1] == "" {
			delete(objects, flat[i])
		} else {
			objects[flat[i]] = flat[i+1]
		}
	}
	return len(flat) / 2, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

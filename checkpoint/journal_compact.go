package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Run compacts the journal whenever the segments written since the last snapshot outgrow the
// index, until ctx ends. A compaction cut short (ctx, NATS down, a crash) leaves the index as
// it was; the next one cleans up after it. It returns an error matching ErrConflict when
// another journal of the source replaced the snapshot head, nil when ctx ends.
func (j *Journal) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-j.compactC:
			err := j.compact(ctx)
			if errors.Is(err, ErrConflict) {
				return err // another journal of the source: stop, as for a checkpoint
			}
			j.mu.Lock()
			if err == nil {
				if j.failures > 0 {
					zerolog.Ctx(ctx).Info().Str("journal", j.tok).Int("failed_before", j.failures).Msg("index compacted")
				}
				j.retryAt, j.failures = 0, 0
			} else {
				// Not again until the records since the snapshot double: a compaction reads
				// the whole journal, and trying after every segment would flood the server
				// and the log while it fails.
				j.retryAt, j.failures = 2*j.written, j.failures+1
			}
			failures := j.failures
			j.mu.Unlock()
			if err != nil && ctx.Err() == nil && failures == 1 {
				zerolog.Ctx(ctx).Warn().Err(err).Str("journal", j.tok).Msg("index compaction failed, trying again once the records since the snapshot double")
			}
		}
	}
}

// compact writes a snapshot of every segment up to the last one before which every segment is
// answered, then removes the segments and the older snapshot.
func (j *Journal) compact(ctx context.Context) error {
	j.mu.Lock()
	through := j.next - 1
	for n := range j.open {
		through = min(through, n-1)
	}
	prev := j.through
	j.mu.Unlock()
	if through <= prev {
		return nil
	}
	st, err := readJournal(ctx, j.kv, j.tok, "")
	if err != nil {
		return err
	}
	objects, folded, err := st.fold(through)
	if err != nil {
		return err
	}
	if err := j.snapshot(ctx, st, through, objects, nil); err != nil {
		return err
	}
	j.mu.Lock()
	j.written = max(j.written-folded, 0)
	j.mu.Unlock()
	return nil
}

// snapshot writes objects as generation st's next, through segment through, then removes the
// older snapshot's chunks, the segments up to through and the legacy keys (full subjects).
// Each step is safe to be cut short: a loader reads the head, which is written only after its
// chunks, and ignores segments up to the head's through and chunks of other generations.
func (j *Journal) snapshot(ctx context.Context, st *journalState, through uint64, objects map[string]string, legacy []string) error {
	gen, writer := st.head.Generation+1, newChunkWriter()
	chunks, err := j.writeChunks(ctx, gen, writer, objects)
	if err != nil {
		return err
	}
	if err := j.step("head"); err != nil {
		return err
	}
	h, _ := json.Marshal(head{Format: headFormat, Generation: gen, Writer: writer, Chunks: chunks, Through: through, Objects: len(objects)})
	// Compare-and-swap on the head this journal loaded or last wrote (never the one just
	// read, which may be another journal's), so that two journals of the source never
	// replace each other's snapshot unnoticed.
	j.mu.Lock()
	headRev := j.headRev
	j.mu.Unlock()
	var rev uint64
	if headRev == 0 {
		rev, err = j.kv.Create(ctx, headKey(j.tok), h)
	} else {
		rev, err = j.kv.Update(ctx, headKey(j.tok), h, headRev)
	}
	if wrongLast(err) {
		err = conflictError{what: "index snapshot head"}
	}
	if err != nil {
		return fmt.Errorf("write index snapshot head %d of %s: %w", gen, j.tok, err)
	}
	j.mu.Lock()
	j.gen, j.through, j.objects, j.headRev = gen, through, len(objects), rev
	j.mu.Unlock()
	var stale []string
	for k := range st.chunks {
		if g, w, _, _ := parseChunkKey(k); g != gen || w != writer {
			stale = append(stale, j.prefix+j.tok+"."+k)
		}
	}
	for n := range st.segments {
		if n <= through {
			stale = append(stale, j.prefix+segmentKey(j.tok, n))
		}
	}
	return j.purge(ctx, append(stale, legacy...))
}

// purge removes the keys of subjects, purgeWindow at a time: an upgrade removes one key per
// object, which one round trip each would make minutes for a large index.
func (j *Journal) purge(ctx context.Context, subjects []string) error {
	futs := make([]jetstream.PubAckFuture, 0, min(len(subjects), purgeWindow))
	wait := func() error {
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("remove %s: %w", f.Msg().Subject, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futs = futs[:0]
		return nil
	}
	for _, subject := range subjects {
		if err := j.step("purge"); err != nil {
			return errors.Join(err, wait())
		}
		f, err := j.js.PublishMsgAsync(purgeMsg(subject))
		if err != nil {
			return errors.Join(fmt.Errorf("remove %s: %w", subject, err), wait())
		}
		if futs = append(futs, f); len(futs) == purgeWindow {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}

// writeChunks writes objects as the chunks of generation gen by writer and returns how many.
func (j *Journal) writeChunks(ctx context.Context, gen uint64, writer string, objects map[string]string) (int, error) {
	var (
		flat []string
		size = 2
		n    int
	)
	// put writes pairs as the next chunk; refused as too large, as two (see answer).
	var put func(pairs []string) error
	put = func(pairs []string) error {
		if err := j.step("chunk"); err != nil {
			return err
		}
		b, _ := json.Marshal(pairs)
		_, err := j.kv.Put(ctx, chunkKey(j.tok, gen, writer, n), b)
		if err != nil && len(pairs) > 2 && tooLarge(err) {
			half := len(pairs) / 4 * 2
			if err := put(pairs[:half]); err != nil {
				return err
			}
			return put(pairs[half:])
		}
		if err != nil {
			return fmt.Errorf("write index snapshot %d chunk %d: %w", gen, n, err)
		}
		n++
		return nil
	}
	flush := func() error {
		err := put(flat)
		flat, size = flat[:0], 2
		return err
	}
	for _, k := range sortedKeys(objects) {
		v := objects[k]
		add := encodedSize(k, v)
		if len(flat) > 0 && size+add > j.maxChunk {
			if err := flush(); err != nil {
				return 0, err
			}
		}
		flat, size = append(flat, k, v), size+add
	}
	if len(flat) > 0 {
		if err := flush(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// step calls the test hook before a step of a snapshot (chunk, head, purge).
func (j *Journal) step(name string) error {
	if j.hook == nil {
		return nil
	}
	return j.hook(name)
}

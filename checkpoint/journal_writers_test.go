package checkpoint

import (
	"errors"
	"maps"
	"testing"
)

// TestTwoJournalsOfOneSourceNeverOverwriteEachOther runs two journals of one source, as two
// relays on the same bucket would (each with its own Index): the second one's segment of a
// number the first wrote, and its snapshot head after the first one's, are conflicts, and the
// first one's records load intact.
func TestTwoJournalsOfOneSourceNeverOverwriteEachOther(t *testing.T) {
	ctx, js, bucket := setup(t)
	const src = "prod.core.configmaps._all"
	var journals []*Journal
	var indexes []*Index
	for range 2 {
		ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
		if err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, ix)
		journals = append(journals, openJournal(ctx, t, ix, src)) // both number from segment 1
	}
	first, second := journals[0], journals[1]
	write(t, first, indexes[0].Record(src, "ns/a", "u1", "1", nil))
	errs := make(chan error, 1)
	second.Write(indexes[1].Record(src, "ns/a", "u2", "2", nil), func(err error) { errs <- err })
	if err := <-errs; !errors.Is(err, ErrConflict) {
		t.Errorf("second journal's segment 1: got %v, want a conflict", err)
	}
	if err := first.compact(ctx); err != nil {
		t.Fatalf("first journal's compaction: %v", err)
	}
	if err := second.compact(ctx); !errors.Is(err, ErrConflict) {
		t.Errorf("second journal's compaction after the first one's: got %v, want a conflict", err)
	}
	want := map[string]string{"ns/a": "u1 1"}
	if got := load(ctx, t, indexes[0], src); !maps.Equal(got, want) {
		t.Errorf("load: got %v, want %v", got, want)
	}
	// The first journal goes on compacting over its own head.
	write(t, first, indexes[0].Record(src, "ns/b", "u3", "3", nil))
	if err := first.compact(ctx); err != nil {
		t.Errorf("first journal's second compaction: %v", err)
	}
}

// TestJournalLoadsPastAnUnknownKey loads a journal holding a key of a kind this release does
// not know (a later release's), instead of refusing the source for good.
func TestJournalLoadsPastAnUnknownKey(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "prod.core.configmaps._all"
	j := openJournal(ctx, t, ix, src)
	write(t, j, ix.Record(src, "ns/a", "u1", "1", nil))
	if _, err := ix.kv.Put(ctx, journalToken(src)+".x.1", []byte("later")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ns/a": "u1 1"}
	if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
		t.Errorf("load: got %v, want %v", got, want)
	}
}

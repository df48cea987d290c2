package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"
)

// openJournal loads source and returns its journal.
func openJournal(ctx context.Context, t *testing.T, ix *Index, source string) *Journal {
	t.Helper()
	j, err := ix.Load(ctx, source, func(string, string, string, []string) {})
	if err != nil {
		t.Fatalf("load %s: %v", source, err)
	}
	return j
}

// write writes recs through j at once (so that they share segments) and waits until every one
// is durable.
func write(t *testing.T, j *Journal, recs ...*nats.Msg) {
	t.Helper()
	errs := make(chan error, len(recs))
	for _, r := range recs {
		j.Write(r, func(err error) { errs <- err })
	}
	for range recs {
		if err := <-errs; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

func journalKeys(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket, source string) map[string]int {
	t.Helper()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for k := range lister.Keys() {
		switch rest, ok := strings.CutPrefix(k, journalToken(source)+"."); {
		case !ok:
			counts["legacy"]++
		case strings.HasPrefix(rest, "s."):
			counts["segment"]++
		case strings.HasPrefix(rest, "c."):
			counts["chunk"]++
		default:
			counts[rest]++
		}
	}
	return counts
}

func TestJournalLoadsInOrderLastWriteWins(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "prod.core.configmaps._all"
	j := openJournal(ctx, t, ix, src)
	write(t, j, ix.Record(src, "a/x", "u1", "1", nil), ix.Record(src, "a/y", "u2", "2", nil))
	write(t, j, ix.Record(src, "a/x", "u1", "3", nil), ix.Record(src, "a/y", "", "", nil), ix.Record(src, "a/z", "u3", "4", []string{"ready"}))
	write(t, j, ix.Record(src, "a/y", "u4", "5", nil), ix.Record(src, "a/z", "u3", "6", nil))
	want := map[string]string{"a/x": "u1 3", "a/y": "u4 5", "a/z": "u3 6"}
	if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
		t.Errorf("load: got %v, want %v", got, want)
	}
	// Many records written at once share segments.
	var recs []*nats.Msg
	for i := range 500 {
		recs = append(recs, ix.Record(src, fmt.Sprintf("b/%d", i), "u", fmt.Sprint(100+i), nil))
	}
	write(t, j, recs...)
	if got := journalKeys(ctx, t, js, bucket, src)["segment"]; got >= 3+500 || got < 4 {
		t.Errorf("segments after 3 writes and a burst of 500 records: got %d, want fewer than one per record", got)
	}
	if got := load(ctx, t, ix, src); len(got) != 503 || got["b/499"] != "u 599" {
		t.Errorf("load after the burst: got %d objects (b/499 %q), want 503", len(got), got["b/499"])
	}
}

func TestJournalCompactsIntoChunksAndLoadsTheSame(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	ix.maxChunk = 300 // a few records per chunk: several chunk boundaries
	const src = "prod.core.configmaps._all"
	j := openJournal(ctx, t, ix, src)
	want := map[string]string{}
	for i := range 40 {
		o := fmt.Sprintf("ns/obj-%d", i)
		write(t, j, ix.Record(src, o, "u", fmt.Sprint(i), nil))
		want[o] = "u " + fmt.Sprint(i)
	}
	long := "ns/" + strings.Repeat("é", 3000) // hashed key, a record larger than a chunk
	write(t, j, ix.Record(src, long, "u", "77", nil), ix.Record(src, "ns/obj-3", "", "", nil))
	want[long] = "u 77"
	delete(want, "ns/obj-3")
	if err := j.compact(ctx); err != nil {
		t.Fatalf("compact: %v", err)
	}
	keys := journalKeys(ctx, t, js, bucket, src)
	if keys["segment"] != 0 || keys["chunk"] < 3 || keys["head"] != 1 {
		t.Errorf("after compaction: got %v, want no segment, several chunks and a head", keys)
	}
	// A record after the snapshot, and a second compaction that replaces the first one's chunks.
	write(t, j, ix.Record(src, "ns/obj-4", "u", "99", nil))
	want["ns/obj-4"] = "u 99"
	if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
		t.Errorf("load after compaction: got %d objects, want %d; differ: %v", len(got), len(want), diff(got, want))
	}
	if err := j.compact(ctx); err != nil {
		t.Fatalf("second compaction: %v", err)
	}
	if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
		t.Errorf("load after the second compaction: differ: %v", diff(got, want))
	}
	if keys := journalKeys(ctx, t, js, bucket, src); keys["segment"] != 0 || keys["head"] != 1 {
		t.Errorf("after the second compaction: got %v, want only the new generation's chunks", keys)
	}
}

func TestJournalSnapshotCutShortAtAnyStepLoadsTheSame(t *testing.T) {
	for _, cut := range []string{"chunk", "head", "purge"} {
		t.Run("cut before "+cut, func(t *testing.T) {
			ctx, js, bucket := setup(t)
			ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			ix.maxChunk = 200
			const src = "prod.core.configmaps._all"
			j := openJournal(ctx, t, ix, src)
			want := map[string]string{}
			for i := range 30 {
				o := fmt.Sprintf("ns/o-%d", i)
				write(t, j, ix.Record(src, o, "u", fmt.Sprint(i), nil))
				want[o] = "u " + fmt.Sprint(i)
			}
			if err := j.compact(ctx); err != nil { // generation 1, then records after it
				t.Fatal(err)
			}
			write(t, j, ix.Record(src, "ns/o-1", "", "", nil), ix.Record(src, "ns/o-2", "u", "50", nil))
			delete(want, "ns/o-1")
			want["ns/o-2"] = "u 50"
			seen := 0
			j.hook = func(step string) error {
				if step == cut {
					if seen++; seen == 2 || cut == "head" {
						return errStep
					}
				}
				return nil
			}
			if err := j.compact(ctx); !errors.Is(err, errStep) {
				t.Fatalf("compaction cut before %s: got %v, want it cut short", cut, err)
			}
			if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
				t.Fatalf("load after a compaction cut before %s: differ: %v", cut, diff(got, want))
			}
			// The next compaction (after a restart) cleans up and loads the same.
			j2 := openJournal(ctx, t, ix, src)
			if err := j2.compact(ctx); err != nil {
				t.Fatal(err)
			}
			if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
				t.Errorf("load after the next compaction: differ: %v", diff(got, want))
			}
		})
	}
}

func TestLegacyKeysMoveIntoASnapshotSafelyAtEveryStep(t *testing.T) {
	for _, cut := range []string{"", "chunk", "head", "purge"} {
		t.Run("cut before "+cut, func(t *testing.T) {
			ctx, js, bucket := setup(t)
			ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			ix.maxChunk = 200
			const src = "prod.core.configmaps._all"
			want := map[string]string{}
			long := "ns/" + strings.Repeat("n", 4100)
			for i, o := range []string{"ns/a", "ns/b", "_/c", "x", long, "ns/a\nb", "ns/d", "ns/e"} {
				if _, err := js.PublishMsg(ctx, ix.Record(src, o, "u", fmt.Sprint(i+1), nil)); err != nil {
					t.Fatal(err)
				}
				want[o] = "u " + fmt.Sprint(i+1)
			}
			if _, err := js.PublishMsg(ctx, ix.Record(src, "ns/held", "u", "20", []string{"ready"})); err != nil {
				t.Fatal(err)
			}
			want["ns/held"] = "u 20 ready"
			if cut != "" {
				ix.hook = func(step string) error {
					if step == cut {
						return errStep
					}
					return nil
				}
				if _, err := ix.Load(ctx, src, func(string, string, string, []string) {}); !errors.Is(err, errStep) {
					t.Fatalf("load cut before %s: got %v, want it cut short", cut, err)
				}
				ix.hook = nil
			}
			if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
				t.Fatalf("load after an upgrade cut before %q: differ: %v", cut, diff(got, want))
			}
			keys := journalKeys(ctx, t, js, bucket, src)
			if keys["legacy"] != 0 || keys["head"] != 1 {
				t.Errorf("after the upgrade: got %v, want no per-object key and a head", keys)
			}
			// The journal goes on after the upgrade.
			j := openJournal(ctx, t, ix, src)
			write(t, j, ix.Record(src, "ns/a", "u", "30", nil))
			want["ns/a"] = "u 30"
			if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
				t.Errorf("load after a write: differ: %v", diff(got, want))
			}
		})
	}
}

func TestPerObjectKeysOfAnOlderRelayRunAfterTheJournalWin(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "prod.core.configmaps._all"
	j := openJournal(ctx, t, ix, src)
	write(t, j, ix.Record(src, "ns/a", "u", "1", nil), ix.Record(src, "ns/b", "u", "2", nil))
	// An older relay (after a downgrade) does not see the journal and records ns/a again.
	if _, err := js.PublishMsg(ctx, ix.Record(src, "ns/a", "u", "7", nil)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ns/a": "u 7", "ns/b": "u 2"}
	if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
		t.Errorf("load: got %v, want %v", got, want)
	}
}

func TestJournalWritersRunConcurrentlyWithoutLosingARecord(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "prod.core.pods._all"
	j := openJournal(ctx, t, ix, src)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var recs []*nats.Msg
			for i := range 300 {
				recs = append(recs, ix.Record(src, fmt.Sprintf("w%d/%d", w, i), "u", "1", nil))
			}
			write(t, j, recs...)
		}()
	}
	wg.Wait()
	if got := load(ctx, t, ix, src); len(got) != 1200 {
		t.Errorf("load: got %d objects, want 1200", len(got))
	}
}

func diff(got, want map[string]string) []string {
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, fmt.Sprintf("%.30q: got %q want %q", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%.30q: got %q, want none", k, v))
		}
	}
	return out
}

func TestJournalCompactsByItselfOnceItOutgrowsTheIndex(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "prod.core.configmaps._all"
	j := openJournal(ctx, t, ix, src)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- j.Run(runCtx) }()
	defer func() { stop(); <-done }()
	// 100 objects changed over and over: far more records than objects.
	want := map[string]string{}
	for round := range compactMinRecords/100 + 2 {
		var recs []*nats.Msg
		for i := range 100 {
			o := fmt.Sprintf("ns/o-%d", i)
			rv := fmt.Sprint(round*100 + i + 1)
			recs = append(recs, ix.Record(src, o, "u", rv, nil))
			want[o] = "u " + rv
		}
		write(t, j, recs...)
	}
	var keys map[string]int
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		keys = journalKeys(ctx, t, js, bucket, src)
		return keys["head"] == 1, nil
	}); err != nil {
		t.Fatalf("no snapshot after %d records of 100 objects: keys %v", (compactMinRecords/100+2)*100, keys)
	}
	if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
		t.Errorf("load after the compaction: differ: %v", diff(got, want))
	}
}

func TestEncodedSizeIsTheRecordsShareOfTheJSON(t *testing.T) {
	long := "ns/" + strings.Repeat("é", 3000)
	key := objectKey(long)
	for _, v := range []string{"u 1", string(encodeEntry(key, long, "u", "2", []string{"ready"})), "",
		"a<b>&c", "tab\there\n", "\x00\x1f\x7f", "bad \xff utf-8", "sep \u2028\u2029", `quote " and \\`} {
		b, _ := json.Marshal([]string{key, v})
		if got, want := encodedSize(key, v), len(b)-2+1; got != want {
			t.Errorf("encodedSize(%.20q, %.40q): got %d, want %d", key, v, got, want)
		}
	}
}

func TestJournalLoadedAgainNumbersItsSegmentsAfterThePreviousOnesInFlight(t *testing.T) {
	ctx, js, bucket := setup(t)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	const src = "prod.core.configmaps._all"
	old := openJournal(ctx, t, ix, src)
	write(t, old, ix.Record(src, "ns/a", "u", "1", nil))
	// A segment of the old journal handed out but not in the bucket yet.
	old.mu.Lock()
	old.queue = append(old.queue, pendingRecord{key: objectKey("ns/b"), value: "u 2", done: func(error) {}})
	late := old.takeLocked()
	old.mu.Unlock()
	j := openJournal(ctx, t, ix, src)
	write(t, j, ix.Record(src, "ns/c", "u", "3", nil))
	old.send(late) // lands after the new journal's first segment
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(load(ctx, t, ix, src)) == 3, nil
	}); err != nil {
		t.Errorf("load: got %v, want ns/a, ns/b and ns/c (no segment overwritten)", load(ctx, t, ix, src))
	}
}

// errStep is what a test's hook returns to cut a snapshot short, as a crash would.
var errStep = errors.New("cut short")

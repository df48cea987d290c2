package checkpoint

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJournalFitsABucketWithASmallMaxValueSize writes records whose values JSON escapes
// heavily (held names, long names in the hashed form) into a bucket that takes values of at
// most 16 KiB: every record becomes durable and compacts, both when the journal measures the
// limit and when the limit is lower than it measured (segments and chunks refused as too
// large are split and written again).
func TestJournalFitsABucketWithASmallMaxValueSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		measured bool
	}{
		{name: "limit measured", measured: true},
		{name: "limit lower than measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, js, bucket := setup(t)
			if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: bucket, History: 1, LimitMarkerTTL: purgeMarkerTTL, MaxValueSize: 16 << 10,
			}); err != nil {
				t.Fatal(err)
			}
			ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.measured {
				ix.maxSeg, ix.maxChunk = segmentMaxBytes, chunkMaxBytes
			}
			const src = "prod.core.configmaps._all"
			j := openJournal(ctx, t, ix, src)
			held := []string{`"quoted"`, `back\slash`, "<tag>&"}
			want := map[string]string{}
			var recs []*nats.Msg
			for i := range 2000 {
				o := fmt.Sprintf("ns/o-%d", i)
				if i%10 == 0 {
					o = fmt.Sprintf("ns/%s-%d", strings.Repeat(`"x\`, 200), i) // hashed key
				}
				recs = append(recs, ix.Record(src, o, "u", fmt.Sprint(i+1), held))
				want[o] = fmt.Sprintf("u %d %s", i+1, strings.Join(held, ","))
			}
			write(t, j, recs...)
			if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
				t.Fatalf("load of the segments: differ: %v", diff(got, want))
			}
			if err := j.compact(ctx); err != nil {
				t.Fatalf("compact: %v", err)
			}
			if keys := journalKeys(ctx, t, js, bucket, src); keys["head"] != 1 || keys["segment"] != 0 {
				t.Errorf("keys after the compaction: got %v, want a head, chunks and no segment", keys)
			}
			if got := load(ctx, t, ix, src); !maps.Equal(got, want) {
				t.Errorf("load of the snapshot: differ: %v", diff(got, want))
			}
		})
	}
}

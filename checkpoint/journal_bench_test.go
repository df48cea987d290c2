package checkpoint

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchInflight is how many records the benchmarks keep unacknowledged, like the pipeline's
// default window of publishes in flight.
const benchInflight = 1000

// BenchmarkIndexRecords writes b.N index records of distinct objects, benchInflight at a
// time, as releases before the journal did (one key per object, one publish and ack each) and
// through the journal.
func BenchmarkIndexRecords(b *testing.B) {
	ctx, js, bucket := setup(b)
	ix, err := OpenIndex(ctx, js, IndexConfig{Bucket: bucket})
	if err != nil {
		b.Fatal(err)
	}
	records := func(src string, n int) []*nats.Msg {
		out := make([]*nats.Msg, n)
		for i := range out {
			out[i] = ix.Record(src, fmt.Sprintf("bench/object-%d", i), "0b5c7c5e-1f3a-4c55-9c1e-5a0e3f1b2c3d", fmt.Sprint(100000+i), nil)
		}
		return out
	}
	b.Run("per-object-puts", func(b *testing.B) {
		recs := records(fmt.Sprintf("bench.puts.%d", b.N), b.N)
		b.ResetTimer()
		futs := make([]jetstream.PubAckFuture, 0, benchInflight)
		wait := func() {
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
			futs = futs[:0]
		}
		for _, r := range recs {
			f, err := js.PublishMsgAsync(r)
			if err != nil {
				b.Fatal(err)
			}
			if futs = append(futs, f); len(futs) == benchInflight {
				wait()
			}
		}
		wait()
	})
	b.Run("journal", func(b *testing.B) {
		src := fmt.Sprintf("bench.journal.%d", b.N)
		recs := records(src, b.N)
		j, err := ix.Load(ctx, src, func(string, string, string, []string) {})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		errs := make(chan error, benchInflight)
		pending := 0
		wait := func() {
			for ; pending > 0; pending-- {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, r := range recs {
			j.Write(r, func(err error) { errs <- err })
			if pending++; pending == benchInflight {
				wait()
			}
		}
		wait()
	})
}

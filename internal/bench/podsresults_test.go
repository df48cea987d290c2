package bench

import (
	"math"
	"testing"
	"time"
)

func TestSummarizeSecretsGivesRatesAndPeakAgainstBudgetPerKind(t *testing.T) {
	const mb = 1 << 20
	runs := []BudgetRun{
		{What: "base", Resource: "secrets", PeakRSS: 50 * mb},
		{What: "redacted", Resource: "secrets", Objects: 120, ObjectBytes: secretBytes, Budget: 100 * mb, PeakRSS: 100 * mb, SyncTook: 10 * time.Second},
		{What: "published", Resource: "secrets", Objects: 120, ObjectBytes: secretBytes, Budget: 100 * mb, PeakRSS: 300 * mb, SyncTook: 20 * time.Second},
		{What: "redacted", Resource: "secrets", Objects: 120, ObjectBytes: secretBytes, Budget: 100 * mb, PeakRSS: 120 * mb, SyncTook: 14 * time.Second},
		{What: "published", Resource: "secrets", Objects: 120, Err: "run timed out"},
	}
	base, rows := summarizeSecrets(runs)
	if base != 50*mb {
		t.Errorf("got base %d, want %d", base, 50*mb)
	}
	if len(rows) != 2 || rows[0].What != "redacted" || rows[1].What != "published" {
		t.Fatalf("got rows %+v, want redacted then published", rows)
	}
	red, pub := rows[0], rows[1]
	if red.OK != 2 || red.Total != 2 || pub.OK != 1 || pub.Total != 2 {
		t.Errorf("got ok/total %d/%d and %d/%d, want 2/2 and 1/2", red.OK, red.Total, pub.OK, pub.Total)
	}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"redacted time", red.SyncTook.Seconds(), 12},
		{"redacted events/s", red.EventsPerSec, 10},
		{"redacted MB/s", red.MBPerSec, 120 * secretBytes / 1e6 / 12},
		{"redacted peak ratio", red.PeakRatio, 110.0 / 150},
		{"published events/s", pub.EventsPerSec, 6},
		{"published peak ratio", pub.PeakRatio, 2},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s: got %g, want %g", tc.name, tc.got, tc.want)
		}
	}
	if !red.UnderLimit || pub.UnderLimit {
		t.Errorf("got under the limit %v and %v, want true and false", red.UnderLimit, pub.UnderLimit)
	}
}

func TestSummarizePodsComparesTheRelayWithTheNaiveRelay(t *testing.T) {
	ok := func(took time.Duration, changes, published int, cpu float64) PodsRun {
		return PodsRun{
			Sync:   TimedRun{Events: 100, Took: took},
			Steady: PodsSteady{Window: 10 * time.Second, Changes: changes, Published: published, CPU: cpu, Own: Percentiles{N: published, P50: time.Millisecond, P99: 5 * time.Millisecond}},
		}
	}
	p := &Pods{Pods: 100, Runs: map[string][]PodsRun{
		Relay: {ok(time.Second, 200, 200, 0.2), ok(time.Second, 220, 220, 0.2)},
		Naive: {ok(2*time.Second, 200, 200, 0.4), {Sync: TimedRun{Err: "naive exited early"}, Steady: PodsSteady{Err: "naive exited early"}}},
	}}
	tab := summarizePods(p)
	if len(tab.Sync) != 2 || tab.Sync[0].Contender != Naive || tab.Sync[1].Contender != Relay {
		t.Fatalf("got sync rows %+v, want naive then relay", tab.Sync)
	}
	if got := tab.Sync[0].RelayRatio; math.Abs(got-2) > 1e-9 {
		t.Errorf("got relay ÷ naive %g, want 2", got)
	}
	naive, relay := tab.Steady[0], tab.Steady[1]
	if naive.OK != 1 || naive.Total != 2 {
		t.Errorf("got naive steady %d/%d, want 1/2", naive.OK, naive.Total)
	}
	if math.Abs(relay.Achieved-21) > 1e-9 || math.Abs(relay.CPUPer10k-(0.2/200+0.2/220)/2*10000) > 1e-9 {
		t.Errorf("got relay achieved %g/s and %g CPU s per 10k, want 21 and the median of both windows", relay.Achieved, relay.CPUPer10k)
	}
	if relay.OwnN != 420 || relay.Own99 != 5*time.Millisecond {
		t.Errorf("got own latency from %d observations, p99 %s; want 420 and 5ms", relay.OwnN, relay.Own99)
	}
}

package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const lagScrape = `# HELP kube_nats_relay_pipeline_lag_seconds Time from receiving a change
# TYPE kube_nats_relay_pipeline_lag_seconds histogram
kube_nats_relay_pipeline_lag_seconds_bucket{resource="configmaps.v1",le="0.001"} %d
kube_nats_relay_pipeline_lag_seconds_bucket{resource="configmaps.v1",le="0.002"} %d
kube_nats_relay_pipeline_lag_seconds_bucket{resource="configmaps.v1",le="0.004"} %d
kube_nats_relay_pipeline_lag_seconds_bucket{resource="configmaps.v1",le="+Inf"} %d
kube_nats_relay_pipeline_lag_seconds_sum{resource="configmaps.v1"} 1
kube_nats_relay_pipeline_lag_seconds_count{resource="configmaps.v1"} %[4]d
kube_nats_relay_publish_duration_seconds_bucket{resource="configmaps.v1",le="0.001"} 999
`

func lagFixture(t *testing.T, a, b, c, inf int) histogram {
	t.Helper()
	h, err := parseLag(strings.NewReader(fmt.Sprintf(lagScrape, a, b, c, inf)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestOwnLatency(t *testing.T) {
	before := lagFixture(t, 100, 100, 100, 100) // the initial sync, before the window
	// In the window: 50 at most 1ms, 40 more at most 2ms, 9 more at most 4ms, 1 beyond.
	after := lagFixture(t, 150, 190, 199, 200)
	p := ownLatency(before, after)
	if p.N != 100 {
		t.Fatalf("got %d observations, want 100", p.N)
	}
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"p50 at the top of the first bucket", p.P50, time.Millisecond},
		{"p90 at the top of the second", p.P90, 2 * time.Millisecond},
		{"p99 inside the third", p.P99, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		if d := tt.got - tt.want; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s: got %s, want %s", tt.name, tt.got, tt.want)
		}
	}
	// p95 lies halfway through the third bucket's 9 observations: 2ms + 2ms*(5/9).
	h := after.minus(before)
	if got, _ := h.quantile(0.95); got < 3100*time.Microsecond || got > 3120*time.Microsecond {
		t.Errorf("p95: got %s, want about 3.11ms", got)
	}
	if _, ok := before.minus(before).quantile(0.5); ok {
		t.Error("no observations: got a quantile, want none")
	}
	onlyInf := histogram{bounds: []float64{math.Inf(1)}, counts: []float64{3}}
	if _, ok := onlyInf.quantile(0.5); ok {
		t.Error("only the +Inf bucket: got a quantile, want none")
	}
	if _, err := parseLag(strings.NewReader("up 1\n")); err == nil {
		t.Error("no lag buckets: got no error, want one")
	}
}

func TestParseLagSumsEveryResourcesBuckets(t *testing.T) {
	text := `# TYPE kube_nats_relay_pipeline_lag_seconds histogram
kube_nats_relay_pipeline_lag_seconds_bucket{resource="configmaps.v1",le="0.001"} 2
kube_nats_relay_pipeline_lag_seconds_bucket{resource="configmaps.v1",le="+Inf"} 3
kube_nats_relay_pipeline_lag_seconds_sum{resource="configmaps.v1"} 0.01
kube_nats_relay_pipeline_lag_seconds_count{resource="configmaps.v1"} 3
kube_nats_relay_pipeline_lag_seconds_bucket{resource="secrets.v1",le="0.001"} 5
kube_nats_relay_pipeline_lag_seconds_bucket{resource="secrets.v1",le="+Inf"} 7
kube_nats_relay_pipeline_lag_seconds_sum{resource="secrets.v1"} 0.02
kube_nats_relay_pipeline_lag_seconds_count{resource="secrets.v1"} 7
`
	h, err := parseLag(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := histogram{bounds: []float64{0.001, math.Inf(1)}, counts: []float64{7, 10}}
	if !slices.Equal(h.bounds, want.bounds) || !slices.Equal(h.counts, want.counts) {
		t.Errorf("got %+v, want %+v", h, want)
	}
	if _, err := parseLag(strings.NewReader("kube_nats_relay_pipeline_lag_seconds_bucket{le=\"0.001\" 1\n")); err == nil {
		t.Error("malformed text: got no error, want one")
	}
}

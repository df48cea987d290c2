package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// lagMetric is the relay's histogram of the time from receiving a change to its JetStream
// ack: the relay's own added latency, read from its /metrics endpoint.
const lagMetric = "kube_nats_relay_pipeline_lag_seconds"

// histogram is a cumulative Prometheus histogram: counts[i] observations were at most
// bounds[i]; the last bound is +Inf.
type histogram struct {
	bounds []float64
	counts []float64
}

// httpAddr returns the address the relay serves /metrics on, read from its log.
func (c *child) httpAddr() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range c.lines {
		if !strings.Contains(line, `"message":"serving /healthz and /readyz"`) {
			continue
		}
		var rec struct {
			Addr string `json:"addr"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err == nil && rec.Addr != "" {
			return rec.Addr, nil
		}
	}
	return "", fmt.Errorf("%s: no http address in its log", c.name)
}

// scrapeLag reads the lag histogram of every resource from the relay at addr, summed.
func scrapeLag(ctx context.Context, addr string) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return histogram{}, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return histogram{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return histogram{}, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	return parseLag(res.Body)
}

// parseLag reads the lag histogram from the Prometheus text format (expfmt), every labelled
// series summed bucket by bucket.
func parseLag(r io.Reader) (histogram, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return histogram{}, fmt.Errorf("parse metrics: %w", err)
	}
	mf, ok := families[lagMetric]
	if !ok || mf.GetType() != dto.MetricType_HISTOGRAM {
		return histogram{}, fmt.Errorf("no %s histogram", lagMetric)
	}
	byBound := map[float64]float64{}
	for _, m := range mf.GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			n := b.GetCumulativeCountFloat()
			if n == 0 {
				n = float64(b.GetCumulativeCount())
			}
			byBound[b.GetUpperBound()] += n
		}
	}
	if len(byBound) == 0 {
		return histogram{}, fmt.Errorf("no %s buckets", lagMetric)
	}
	var h histogram
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h, nil
}

// minus returns the observations of h that came after o (an earlier scrape).
func (h histogram) minus(o histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile does: linear
// interpolation inside the bucket the rank falls in. A rank in the +Inf bucket returns the
// largest finite bound. ok is false without observations.
func (h histogram) quantile(q float64) (d time.Duration, ok bool) {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return 0, false
	}
	rank := q * h.counts[len(h.counts)-1]
	for i, c := range h.counts {
		if c < rank {
			continue
		}
		if math.IsInf(h.bounds[i], 1) {
			if i == 0 {
				return 0, false // no finite bucket to say anything with
			}
			return seconds(h.bounds[i-1]), true
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = h.bounds[i-1], h.counts[i-1]
		}
		if c == below {
			return seconds(h.bounds[i]), true
		}
		return seconds(lo + (h.bounds[i]-lo)*(rank-below)/(c-below)), true
	}
	return seconds(h.bounds[len(h.bounds)-1]), true
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ownLatency turns the lag observations between two scrapes into percentiles (no maximum:
// a histogram does not keep it).
func ownLatency(before, after histogram) Percentiles {
	h := after.minus(before)
	var p Percentiles
	if len(h.counts) == 0 {
		return p
	}
	p.N = int(h.counts[len(h.counts)-1])
	p.P50, _ = h.quantile(0.5)
	p.P90, _ = h.quantile(0.9)
	p.P99, _ = h.quantile(0.99)
	return p
}

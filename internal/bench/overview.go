package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Overview is the top of docs/benchmarks.md: the relay against every reference as ratios,
// and the sizing figures derived from the run, with the plots beside them.
type Overview struct {
	// SyncObjects is the initial sync's size; Rows compare the relay with the references.
	SyncObjects int
	Rows        []OverviewRow
	Sizing      *Sizing `json:",omitempty"`
}

// OverviewRow is the relay's rate beside one reference's in one scenario.
type OverviewRow struct {
	Scenario, Reference string
	Relay, Rate         float64
	// Ratio is the relay's rate ÷ the reference's.
	Ratio float64
	// Target is the least Ratio issue 18 asks for (0: none); Met says it is reached.
	Target float64 `json:",omitempty"`
	Met    bool    `json:",omitempty"`
}

// Sizing are the per-object costs of the relay, from the initial sync and memory scenarios.
type Sizing struct {
	// CPUPer10k is the relay process's CPU seconds per 10,000 events of its initial sync;
	// EventsPerCore is the same as events per CPU second (what one core sustains);
	// NATSPer10k and KubePer10k the CPU seconds of nats-server and of kube-apiserver plus
	// etcd over the same runs, per 10,000 events.
	CPUPer10k, EventsPerCore, NATSPer10k, KubePer10k float64
	// BaseObjects is the memory scenario's smallest size, BaseRSS the relay's RSS there;
	// RSSPer10k is its RSS growth per 10,000 objects towards the largest size, and
	// NaiveRSSPer10k the naive relay's.
	BaseObjects             int     `json:",omitempty"`
	BaseRSS                 float64 `json:",omitempty"`
	RSSPer10k               float64 `json:",omitempty"`
	NaiveRSSPer10k          float64 `json:",omitempty"`
	LargestObjects          int     `json:",omitempty"`
	LargestRSS, LargestPeak float64 `json:",omitempty"`
}

// overviewReferences are the rows of the overview, in order: initial sync references, then
// the catch-up's bare watch and naive relay.
var overviewReferences = []string{MachineLimit, BareList, BareProto, Ceiling, NaiveLean, Naive}

// overview computes the top of the page from the summary's tables.
func overview(r *Results, s *Summary) *Overview {
	o := &Overview{}
	target := func(scenarioIsSync bool, ref string) float64 {
		for _, g := range rateTargets {
			if g.scenario == scenarioIsSync && g.reference == ref {
				return g.ratio
			}
		}
		return 0
	}
	rows := func(scenario string, t *ThroughputTable, refs []string, isSync bool) {
		rel, ok := row(t, Relay)
		if !ok {
			return
		}
		for _, ref := range refs {
			x, ok := row(t, ref)
			if !ok {
				continue
			}
			or := OverviewRow{Scenario: scenario, Reference: ref, Relay: rel.Rate, Rate: x.Rate, Ratio: rel.Rate / x.Rate, Target: target(isSync, ref)}
			or.Met = or.Target > 0 && or.Ratio >= or.Target
			o.Rows = append(o.Rows, or)
		}
	}
	if s.Sync != nil {
		o.SyncObjects = s.Sync.Events
		rows("initial sync", s.Sync, overviewReferences, true)
		if rel, ok := row(s.Sync, Relay); ok && rel.CPUPer10k > 0 {
			n := float64(s.Sync.Events) / 10000
			o.Sizing = &Sizing{CPUPer10k: rel.CPUPer10k, EventsPerCore: 10000 / rel.CPUPer10k,
				NATSPer10k: rel.NATSCPU / n, KubePer10k: rel.KubeCPU / n}
		}
	}
	for i := range s.Catchup {
		rows("catch-up ("+strings.ReplaceAll(s.Catchup[i].History, "-", " ")+")", &s.Catchup[i], []string{RawWatch, Naive}, false)
	}
	if m := r.Memory; m != nil && len(r.Config.MemoryObjects) > 0 {
		if o.Sizing == nil {
			o.Sizing = &Sizing{}
		}
		sizes := r.Config.MemoryObjects
		lo, hi := sizes[0], sizes[len(sizes)-1]
		if run, ok := m.find(Relay, lo); ok {
			o.Sizing.BaseObjects, o.Sizing.BaseRSS = lo, float64(run.RSS)
		}
		if run, ok := m.find(Relay, hi); ok {
			o.Sizing.LargestObjects, o.Sizing.LargestRSS, o.Sizing.LargestPeak = hi, float64(run.RSS), float64(run.PeakRSS)
		}
		rss := func(mr MemoryRun) float64 { return float64(mr.RSS) }
		if v, _, ok := m.perObject(Relay, sizes, rss); ok {
			o.Sizing.RSSPer10k = v * 10000
		}
		if v, _, ok := m.perObject(Naive, sizes, rss); ok {
			o.Sizing.NaiveRSSPer10k = v * 10000
		}
	}
	if len(o.Rows) == 0 && o.Sizing == nil {
		return nil
	}
	return o
}

// row returns a contender's row of a throughput table when it has a successful run.
func row(t *ThroughputTable, contender string) (ThroughputRow, bool) {
	for _, r := range t.Rows {
		if r.Contender == contender && r.OK > 0 {
			return r, true
		}
	}
	return ThroughputRow{}, false
}

// Plot files, under the artifact directory, one pair per mode.
func ratePlotFile(mode string) string { return mode + "-initial-sync-rate.svg" }
func rssPlotFile(mode string) string  { return mode + "-rss.svg" }

// ratePlot is the initial-sync rate against object count, from the sweep.
func ratePlot(s *Summary) Plot {
	p := Plot{Title: "Initial sync: rate against object count", XLabel: "objects (ConfigMaps of about 1 KiB)", YLabel: "events/s (median)"}
	for _, c := range []string{Relay, RelayBefore, NaiveLean, Naive, MachineLimit} {
		sr := Series{Name: c, Dashed: c == MachineLimit}
		for i := range s.Sweep {
			if x, ok := row(&s.Sweep[i], c); ok {
				sr.Points = append(sr.Points, Point{X: float64(s.Sweep[i].Events), Y: x.Rate})
			}
		}
		p.Series = append(p.Series, sr)
	}
	return p
}

// rssPlot is RSS against object count: after the sync and the settle, from the memory
// scenario, and the peak during the initial sync (VmHWM, median over rounds), from the
// sweep when it ran, else from the memory scenario.
func rssPlot(r *Results) Plot {
	p := Plot{Title: "Memory: RSS against watched objects", XLabel: "objects (ConfigMaps of about 1 KiB)", YLabel: "MiB"}
	for _, c := range []string{Relay, RelayBefore, Naive} {
		rss, peak := Series{Name: c + " RSS"}, Series{Name: c + " peak RSS", Dashed: true}
		for _, size := range r.Config.MemoryObjects {
			if run, ok := r.Memory.find(c, size); ok {
				rss.Points = append(rss.Points, Point{X: float64(size), Y: mib(run.RSS)})
				peak.Points = append(peak.Points, Point{X: float64(size), Y: mib(run.PeakRSS)})
			}
		}
		if r.Summary != nil && len(r.Summary.Sweep) > 0 {
			peak = Series{Name: c + " peak RSS (sweep)", Dashed: true}
			for i := range r.Summary.Sweep {
				if x, ok := row(&r.Summary.Sweep[i], c); ok && x.PeakRSS > 0 {
					peak.Points = append(peak.Points, Point{X: float64(r.Summary.Sweep[i].Events), Y: x.PeakRSS / (1 << 20)})
				}
			}
		}
		p.Series = append(p.Series, rss, peak)
	}
	return p
}

// writePlots writes r's plots into the artifact directory and returns the paths of those
// it wrote (a plot without data is not written: a run without sweep or memory scenario
// keeps the previous files).
func writePlots(cfg Config, r *Results) (rate, rss string, err error) {
	write := func(name string, p Plot) (string, error) {
		if !p.hasPoints() {
			return "", nil
		}
		var b bytes.Buffer
		if err := p.WriteSVG(&b); err != nil {
			return "", err
		}
		path := filepath.Join(cfg.ArtifactDir, name)
		return path, os.WriteFile(path, b.Bytes(), 0o644)
	}
	if rate, err = write(ratePlotFile(r.Mode), ratePlot(r.Summary)); err != nil {
		return "", "", err
	}
	if r.Memory != nil {
		rss, err = write(rssPlotFile(r.Mode), rssPlot(r))
	}
	return rate, rss, err
}

// overviewData is what the overview template renders.
type overviewData struct {
	Mode     string
	Started  time.Time
	Command  string
	Overview *Overview
	// RatePlot and RSSPlot are the plots' paths relative to the report, "" when absent.
	RatePlot, RSSPlot string
}

// overviewOf chooses the run the top of the page shows: the full run when its results have
// the references of issue 18, otherwise r.
func overviewOf(cfg Config, r *Results) overviewData {
	src := r
	if r.Mode != ModeFull {
		if full, err := loadResults(filepath.Join(cfg.ArtifactDir, ModeFull+".json")); err == nil {
			full.Summary = Summarize(full)
			if full.Summary.Overview != nil && hasReference(full.Summary.Overview, MachineLimit) {
				src = full
			}
		}
	}
	d := overviewData{Mode: src.Mode, Started: src.Started, Command: src.Command}
	if src.Summary != nil {
		d.Overview = src.Summary.Overview
	}
	rel := func(name string) string {
		path := filepath.Join(cfg.ArtifactDir, name)
		if _, err := os.Stat(path); err != nil {
			return ""
		}
		p, err := filepath.Rel(filepath.Dir(cfg.Out), path)
		if err != nil {
			return ""
		}
		return filepath.ToSlash(p)
	}
	d.RatePlot, d.RSSPlot = rel(ratePlotFile(src.Mode)), rel(rssPlotFile(src.Mode))
	return d
}

func hasReference(o *Overview, ref string) bool {
	for _, r := range o.Rows {
		if r.Reference == ref {
			return true
		}
	}
	return false
}

// loadResults reads a run's JSON; a field whose type changed since is skipped.
func loadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(b, &r); err != nil && !errors.As(err, &typeErr) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &r, nil
}

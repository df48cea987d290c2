package bench

import (
	"fmt"
	"slices"
	"time"
)

// Summaries over rounds: medians of the successful runs of each contender. Summarize turns
// a run's raw results into every figure the report shows, so that the JSON holds them as
// numbers and the Markdown template only formats them.

// Summary is every figure the report shows, computed from the raw runs of Results.
type Summary struct {
	Targets []Target          `json:",omitempty"`
	Sync    *ThroughputTable  `json:",omitempty"`
	Catchup []ThroughputTable `json:",omitempty"`
	// Sweep is the initial sync's table at each size of the sweep.
	Sweep []ThroughputTable `json:",omitempty"`
	// Overview is the top of the page: the relay against the references, and sizing.
	Overview *Overview      `json:",omitempty"`
	Steady   []LatencyTable `json:",omitempty"`
	// PerObject are the memory scenario's bytes per watched object.
	PerObject []PerObject `json:",omitempty"`
	Budget    []BudgetRow `json:",omitempty"`
	// BudgetBase is the peak RSS of the budget scenario's run without objects.
	BudgetBase int64 `json:",omitempty"`
	// BeforeAfter compares the relay with the baseline's (-baseline), figure by figure.
	BeforeAfter []Comparison `json:",omitempty"`
	// Pods is the pods scenario's table.
	Pods *PodsTable `json:",omitempty"`
}

// Units of a Comparison's values.
const (
	unitRate    = "/s"    // events or changes per second
	unitLatency = "ms"    // a time.Duration, shown in milliseconds
	unitTime    = "s"     // a time.Duration, shown as fmtDur does
	unitBytes   = "MiB"   // bytes, shown in MiB
	unitCPU     = "CPU s" // CPU seconds per 10,000 events
)

// Comparison is one figure of the relay beside the same figure of the baseline.
type Comparison struct {
	What, Unit    string
	Relay, Before float64
	// Ratio is Relay ÷ Before.
	Ratio float64
}

// Target is one of the targets evaluated against this run's medians.
type Target struct {
	Target, Measured string
	// Value is the measured figure the verdict is about (a ratio, a latency in
	// nanoseconds, bytes); Met says whether it reaches the target.
	Value   float64
	Met     bool
	Verdict string
}

// ThroughputTable is a throughput scenario's table: one row per contender.
type ThroughputTable struct {
	Events, MsgBytes int
	WriteRate        float64 `json:",omitempty"`
	History          string  `json:",omitempty"`
	Rows             []ThroughputRow
}

// ThroughputRow summarises one contender's runs of a throughput scenario.
type ThroughputRow struct {
	Contender string
	OK, Total int
	// Err is the first run's error when no run succeeded.
	Err  string `json:",omitempty"`
	Took time.Duration
	// Rate, MinRate and MaxRate are events per second over the scenario's events.
	Rate, MinRate, MaxRate float64
	// RelayRatio is the relay's rate divided by this row's (0 on the relay's own row or
	// when the relay has no successful run).
	RelayRatio            float64 `json:",omitempty"`
	CPUPer10k             float64
	FirstAt, CheckpointAt time.Duration
	PeakRSS               float64
	NATSCPU, KubeCPU      float64
	HarnessCPU            float64
	// OtherCores is the CPU other work on the machine used during the run, in cores.
	OtherCores float64
	Published  int `json:",omitempty"`
	Relisted   int `json:",omitempty"`
	// ListTook and PublishTook are the machine limit's halves (medians), 0 for the others.
	ListTook    time.Duration `json:",omitempty"`
	PublishTook time.Duration `json:",omitempty"`
}

// LatencyTable is the steady-state table at one rate.
type LatencyTable struct {
	Rate     int
	Duration time.Duration
	Rows     []LatencyRow
}

// LatencyRow summarises one contender's steady-state windows.
type LatencyRow struct {
	Contender string
	OK, Total int
	Err       string `json:",omitempty"`
	Achieved  float64
	E2E50     time.Duration
	E2E99     time.Duration
	E2EMax    time.Duration
	// HasAdded says the contender publishes, so that its added latency is reported.
	HasAdded     bool
	Added50      time.Duration
	Added99      time.Duration
	Own50, Own99 time.Duration
	// OwnN is the number of observations of the relay's own latency over every window.
	OwnN       int
	Missing    int
	CPUPer10k  float64
	NATSPer10k float64
	OtherCores float64
}

// PerObject is a figure's growth per watched object between the smallest and the largest
// size the memory scenario measured: the fixed cost of the process cancels out.
type PerObject struct {
	What  string
	Bytes float64
	How   string
}

// BudgetRow is one run of the budget scenario with its ratios.
type BudgetRow struct {
	BudgetRun
	// PeakRatio is peak RSS ÷ (budget + base), 0 when it cannot be computed; RatioMet says
	// it is at most the target ratio.
	PeakRatio float64 `json:",omitempty"`
	RatioMet  bool    `json:",omitempty"`
	// HasLimit says the run relayed objects, so that its peak RSS is compared with the
	// chart's limit; UnderLimit is that comparison.
	HasLimit   bool `json:",omitempty"`
	UnderLimit bool `json:",omitempty"`
}

// reportContenders is the order of the rows of every table.
var reportContenders = []string{Ceiling, RawWatch, BareList, BareProto, MachineLimit, NaiveLean, Naive, Relay, RelayBefore}

// Summarize computes every figure of the report from r's runs.
func Summarize(r *Results) *Summary {
	s := &Summary{}
	if r.Sync != nil {
		t := throughputTable(r.Sync)
		s.Sync = &t
	}
	for _, cu := range r.Catchup {
		s.Catchup = append(s.Catchup, throughputTable(cu))
	}
	for _, sw := range r.Sweep {
		s.Sweep = append(s.Sweep, throughputTable(sw))
	}
	for _, st := range r.Steady {
		t := LatencyTable{Rate: st.Rate, Duration: st.Duration}
		for _, c := range reportContenders {
			if row := summarizeLatency(c, st.Runs[c]); row.Total > 0 {
				t.Rows = append(t.Rows, row)
			}
		}
		s.Steady = append(s.Steady, t)
	}
	if r.Memory != nil {
		s.PerObject = perObjectFigures(r.Memory, r.Config.MemoryObjects)
	}
	if r.Budget != nil {
		s.BudgetBase = r.Budget.base()
		for _, run := range r.Budget.Runs {
			row := BudgetRow{BudgetRun: run}
			if run.Err == "" {
				if s.BudgetBase > 0 && run.Budget > 0 && run.Objects > 0 {
					row.PeakRatio = float64(run.PeakRSS) / float64(run.Budget+s.BudgetBase)
					row.RatioMet = row.PeakRatio <= r.Budget.Ratio
				}
				row.HasLimit = run.Objects > 0
				row.UnderLimit = run.PeakRSS < r.Budget.Limit
			}
			s.Budget = append(s.Budget, row)
		}
	}
	if r.Pods != nil {
		s.Pods = summarizePods(r.Pods)
	}
	s.Targets = targets(r)
	s.Overview = overview(r, s)
	s.BeforeAfter = beforeAfter(r, s)
	return s
}

// beforeAfter lists the figures both the relay and the baseline have, from the tables of s.
func beforeAfter(r *Results, s *Summary) []Comparison {
	var out []Comparison
	add := func(what, unit string, relay, before float64) {
		if relay != 0 && before != 0 {
			out = append(out, Comparison{What: what, Unit: unit, Relay: relay, Before: before, Ratio: relay / before})
		}
	}
	pair := func(rows []ThroughputRow) (ThroughputRow, ThroughputRow, bool) {
		var rel, bef ThroughputRow
		for _, row := range rows {
			switch row.Contender {
			case Relay:
				rel = row
			case RelayBefore:
				bef = row
			}
		}
		return rel, bef, rel.OK > 0 && bef.OK > 0
	}
	throughput := func(name string, t *ThroughputTable) {
		rel, bef, ok := pair(t.Rows)
		if !ok {
			return
		}
		add(name+": rate", unitRate, rel.Rate, bef.Rate)
		add(name+": checkpoint at", unitTime, float64(rel.CheckpointAt), float64(bef.CheckpointAt))
		add(name+": CPU per 10k events", unitCPU, rel.CPUPer10k, bef.CPUPer10k)
		add(name+": peak RSS", unitBytes, rel.PeakRSS, bef.PeakRSS)
	}
	if s.Sync != nil {
		throughput("initial sync", s.Sync)
	}
	for i := range s.Catchup {
		throughput("catch-up ("+s.Catchup[i].History+")", &s.Catchup[i])
	}
	for _, st := range s.Steady {
		var rel, bef LatencyRow
		for _, row := range st.Rows {
			switch row.Contender {
			case Relay:
				rel = row
			case RelayBefore:
				bef = row
			}
		}
		if rel.OK == 0 || bef.OK == 0 {
			continue
		}
		name := fmt.Sprintf("steady %d/s", st.Rate)
		add(name+": added p50", unitLatency, float64(rel.Added50), float64(bef.Added50))
		add(name+": added p99", unitLatency, float64(rel.Added99), float64(bef.Added99))
		add(name+": own p50", unitLatency, float64(rel.Own50), float64(bef.Own50))
		add(name+": own p99", unitLatency, float64(rel.Own99), float64(bef.Own99))
		add(name+": CPU per 10k events", unitCPU, rel.CPUPer10k, bef.CPUPer10k)
	}
	if r.Memory != nil {
		for _, size := range r.Config.MemoryObjects {
			rel, ok1 := r.Memory.find(Relay, size)
			bef, ok2 := r.Memory.find(RelayBefore, size)
			if !ok1 || !ok2 {
				continue
			}
			name := fmt.Sprintf("memory at %s objects", fmtCount(size))
			add(name+": RSS", unitBytes, float64(rel.RSS), float64(bef.RSS))
			add(name+": live heap (gctrace)", unitBytes, float64(rel.HeapLiveMB)*(1<<20), float64(bef.HeapLiveMB)*(1<<20))
			add(name+": sync time", unitTime, float64(rel.SyncTook), float64(bef.SyncTook))
		}
	}
	return out
}

// throughputTable summarises every contender of a throughput scenario.
func throughputTable(t *Throughput) ThroughputTable {
	out := ThroughputTable{Events: t.Events, MsgBytes: t.MsgBytes, WriteRate: t.WriteRate, History: t.History}
	relay := summarize(Relay, t.Runs[Relay], t.Events)
	for _, c := range reportContenders {
		row := summarize(c, t.Runs[c], t.Events)
		if row.Total == 0 {
			continue
		}
		if row.OK == 0 {
			row.Err = firstErr(t.Runs[c])
		} else if c != Relay && relay.OK > 0 {
			row.RelayRatio = relay.Rate / row.Rate
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// others returns the CPU seconds of the machine not used by the contender, the servers or
// the harness during an interval, in cores.
func others(cpu map[string]float64, contender float64, interval time.Duration) float64 {
	if interval <= 0 || cpu[cpuMachine] == 0 {
		return 0
	}
	rest := cpu[cpuMachine] - contender
	for k, v := range cpu {
		if k != cpuMachine {
			rest -= v
		}
	}
	return max(rest, 0) / interval.Seconds()
}

// summarize returns the medians over the successful runs. basis is the number of events a
// run's rate counts (the scenario's Events: the changes, for catch-up).
func summarize(contender string, runs []TimedRun, basis int) ThroughputRow {
	s := ThroughputRow{Contender: contender, Total: len(runs)}
	var took, first, ckpt, listTook, pubTook []time.Duration
	var rates, cpu, rss, natsCPU, kubeCPU, harness, other []float64
	for _, r := range runs {
		if r.Err != "" || r.Took <= 0 {
			continue
		}
		s.OK++
		took = append(took, r.Took)
		rates = append(rates, float64(basis)/r.Took.Seconds())
		if r.CPU > 0 {
			cpu = append(cpu, r.CPU/float64(max(r.Events, r.Published))*10000)
		}
		if r.FirstAt > 0 {
			first = append(first, r.FirstAt)
		}
		if r.CheckpointAt > 0 {
			ckpt = append(ckpt, r.CheckpointAt)
		}
		if r.ListTook > 0 {
			listTook, pubTook = append(listTook, r.ListTook), append(pubTook, r.PublishTook)
		}
		if r.PeakRSS > 0 {
			rss = append(rss, float64(r.PeakRSS))
		}
		natsCPU = append(natsCPU, r.ServerCPU["nats-server"])
		kubeCPU = append(kubeCPU, r.ServerCPU["kube-apiserver"]+r.ServerCPU["etcd"])
		harness = append(harness, r.ServerCPU[cpuHarness])
		other = append(other, others(r.ServerCPU, r.CPU, r.Took))
		s.Published = r.Published
		if r.Relisted {
			s.Relisted++
		}
	}
	if s.OK == 0 {
		return s
	}
	s.Took, s.Rate = medianDuration(took), median(rates)
	s.MinRate, s.MaxRate = slices.Min(rates), slices.Max(rates)
	s.CPUPer10k, s.PeakRSS = median(cpu), median(rss)
	s.FirstAt, s.CheckpointAt = medianDuration(first), medianDuration(ckpt)
	s.ListTook, s.PublishTook = medianDuration(listTook), medianDuration(pubTook)
	s.NATSCPU, s.KubeCPU = median(natsCPU), median(kubeCPU)
	s.HarnessCPU, s.OtherCores = median(harness), median(other)
	return s
}

func summarizeLatency(contender string, runs []LatencyRun) LatencyRow {
	s := LatencyRow{Contender: contender, Total: len(runs), HasAdded: publishesFromKube(contender)}
	var ach, cpu, natsCPU, other []float64
	var e50, e99, a50, a99, emax, o50, o99 []time.Duration
	for _, r := range runs {
		if r.Err != "" || r.Writes == 0 {
			continue
		}
		s.OK++
		ach = append(ach, r.Achieved)
		e50, e99, emax = append(e50, r.E2E.P50), append(e99, r.E2E.P99), append(emax, r.E2E.Max)
		if r.Added.N > 0 {
			a50, a99 = append(a50, r.Added.P50), append(a99, r.Added.P99)
		}
		if r.Own.N > 0 {
			o50, o99 = append(o50, r.Own.P50), append(o99, r.Own.P99)
			s.OwnN += r.Own.N
		}
		s.Missing += r.Missing
		if r.CPU > 0 {
			cpu = append(cpu, r.CPU/float64(r.Writes)*10000)
		}
		natsCPU = append(natsCPU, r.ServerCPU["nats-server"]/float64(r.Writes)*10000)
		other = append(other, others(r.ServerCPU, r.CPU, r.Window))
	}
	if s.OK == 0 {
		s.Err = firstLatencyErr(runs)
		return s
	}
	s.Achieved = median(ach)
	s.E2E50, s.E2E99, s.E2EMax = medianDuration(e50), medianDuration(e99), medianDuration(emax)
	s.Added50, s.Added99 = medianDuration(a50), medianDuration(a99)
	s.Own50, s.Own99 = medianDuration(o50), medianDuration(o99)
	s.CPUPer10k, s.NATSPer10k = median(cpu), median(natsCPU)
	s.OtherCores = median(other)
	return s
}

// perObjectFigures computes the bytes per watched object of each figure the memory scenario
// has at both its smallest and largest size.
func perObjectFigures(mem *Memory, sizes []int) []PerObject {
	var out []PerObject
	for _, f := range []struct {
		contender, what string
		f               func(MemoryRun) float64
	}{
		{RelayEngine, "engine heap", func(m MemoryRun) float64 { return float64(m.HeapBytes) }},
		{Relay, "relay live heap (gctrace)", func(m MemoryRun) float64 { return float64(m.HeapLiveMB) * (1 << 20) }},
		{Relay, "relay RSS", func(m MemoryRun) float64 { return float64(m.RSS) }},
		{RelayBefore, "relay-before live heap (gctrace)", func(m MemoryRun) float64 { return float64(m.HeapLiveMB) * (1 << 20) }},
		{RelayBefore, "relay-before RSS", func(m MemoryRun) float64 { return float64(m.RSS) }},
		{Naive, "naive live heap (gctrace)", func(m MemoryRun) float64 { return float64(m.HeapLiveMB) * (1 << 20) }},
		{Naive, "naive RSS", func(m MemoryRun) float64 { return float64(m.RSS) }},
	} {
		if v, how, ok := mem.perObject(f.contender, sizes, f.f); ok {
			out = append(out, PerObject{What: f.what, Bytes: v, How: how})
		}
	}
	return out
}

// rateTargets are issue 18's throughput targets: the relay's rate at least ratio times the
// reference's, in the initial sync (scenario true) or in every catch-up (false).
var rateTargets = []struct {
	scenario  bool
	reference string
	title     string
	ratio     float64
}{
	{true, MachineLimit, "machine limit", 0.8},
	{true, NaiveLean, "lean naive relay", 2},
	{false, RawWatch, "bare watch of the same history", 0.8},
}

// targets evaluates the targets against this run's medians.
func targets(r *Results) []Target {
	var rows []Target
	add := func(target, measured string, value float64, met bool) {
		rows = append(rows, Target{Target: target, Measured: measured, Value: value, Met: met, Verdict: verdict(met)})
	}
	type scenario struct {
		name string
		t    *Throughput
	}
	scenarios := []scenario{{"initial sync", r.Sync}}
	for _, cu := range r.Catchup {
		scenarios = append(scenarios, scenario{"catch-up (" + historyTitle(cu.History) + ")", cu})
	}
	for _, sc := range scenarios {
		if sc.t == nil {
			continue
		}
		for _, g := range rateTargets {
			if g.scenario != (sc.t == r.Sync) {
				continue
			}
			rel, ref := summarize(Relay, sc.t.Runs[Relay], sc.t.Events), summarize(g.reference, sc.t.Runs[g.reference], sc.t.Events)
			if rel.OK > 0 && ref.OK > 0 {
				x := rel.Rate / ref.Rate
				add(fmt.Sprintf("%s: at least %g× the %s", sc.name, g.ratio, g.title),
					fmt.Sprintf("%.0f vs %.0f/s = %.2f×", rel.Rate, ref.Rate, x), x, x >= g.ratio)
			}
		}
	}
	for _, st := range r.Steady {
		if st.Rate != 1000 {
			continue
		}
		if s := summarizeLatency(Relay, st.Runs[Relay]); s.OK > 0 {
			p99 := s.Added99
			measured := fmt.Sprintf("%s (p50 %s; upper bound, see method) at %.0f changes/s achieved", ms(s.Added99), ms(s.Added50), s.Achieved)
			if s.OwnN > 0 {
				p99 = s.Own99
				measured = fmt.Sprintf("%s (p50 %s) from the relay's metrics; %s from outside (upper bound, see method); at %.0f changes/s achieved",
					ms(s.Own99), ms(s.Own50), ms(s.Added99), s.Achieved)
			}
			met := p99 < 5*time.Millisecond
			t := Target{Target: "relay-added latency p99 under 5 ms at 1,000 changes/s", Measured: measured, Value: float64(p99), Met: met, Verdict: verdict(met)}
			if s.Achieved < 0.9*float64(st.Rate) {
				t.Verdict = fmt.Sprintf("not measurable here: the cluster sustained only %.0f changes/s (%s at that rate)", s.Achieved, t.Verdict)
			}
			rows = append(rows, t)
		}
	}
	if mem := r.Memory; mem != nil {
		sizes := r.Config.MemoryObjects
		if v, _, ok := mem.perObject(RelayEngine, sizes, func(m MemoryRun) float64 { return float64(m.HeapBytes) }); ok {
			add("index cost under 300 bytes per watched object", fmt.Sprintf("%.0f bytes per object (engine heap growth)", v), v, v < 300)
		}
		if run, ok := mem.find(Relay, 100000); ok {
			add("RSS under 150 MB at 100,000 objects", fmtBytes(float64(run.RSS)), float64(run.RSS), run.RSS < 150<<20)
		} else if len(sizes) > 0 && slices.Max(sizes) < 100000 {
			big := slices.Max(sizes)
			if run, ok := mem.find(Relay, big); ok {
				rows = append(rows, Target{Target: "RSS under 150 MB at 100,000 objects", Value: float64(run.RSS),
					Measured: fmt.Sprintf("not measured at 100,000; %s at %s", fmtBytes(float64(run.RSS)), fmtCount(big)), Verdict: "n/a"})
			}
		}
	}
	return rows
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// memoryFigure finds a memory run.
func (m *Memory) find(contender string, objects int) (MemoryRun, bool) {
	if m == nil {
		return MemoryRun{}, false
	}
	for _, r := range m.Runs {
		if r.Contender == contender && r.Objects == objects && r.Err == "" {
			return r, true
		}
	}
	return MemoryRun{}, false
}

// perObject returns the growth of f per object between the smallest and the largest size
// the contender was measured at: the fixed cost of the process cancels out.
func (m *Memory) perObject(contender string, sizes []int, f func(MemoryRun) float64) (float64, string, bool) {
	if len(sizes) < 2 {
		return 0, "", false
	}
	lo, hi := sizes[0], sizes[len(sizes)-1]
	a, ok1 := m.find(contender, lo)
	b, ok2 := m.find(contender, hi)
	if !ok1 || !ok2 {
		return 0, "", false
	}
	return (f(b) - f(a)) / float64(hi-lo), fmt.Sprintf("(%s − %s) / %d objects", fmtCount(hi), fmtCount(lo), hi-lo), true
}

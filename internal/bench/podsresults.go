package bench

import (
	"time"
)

// Pods is the pods scenario: a Deployment's Pods on kwok with churning status, and the
// large Secrets.
type Pods struct {
	// Pods is the Deployment's size, Nodes the simulated nodes they run on.
	Pods, Nodes int
	// ChurnPeriod is the mean cycle of each Pod's status (Ready, restarted and not Ready,
	// Ready again); ChurnAsked the Pod updates per second it asks of the cluster.
	ChurnPeriod time.Duration
	ChurnAsked  float64
	// Window is how long each contender's steady state was measured.
	Window time.Duration
	// BodyMin, BodyAvg and BodyMax are the Pods' JSON sizes as published (managedFields
	// stripped), measured once they ran.
	BodyMin, BodyAvg, BodyMax int
	Runs                      map[string][]PodsRun
	// Secrets are the relay's runs over the budget scenario's large Secrets (runLargeSecrets).
	Secrets []BudgetRun `json:",omitempty"`
}

// PodsRun is one contender's run of the pods scenario: its initial sync, then its steady state.
type PodsRun struct {
	Round  int
	Sync   TimedRun
	Steady PodsSteady
}

// PodsSteady is a contender relaying the churn for the scenario's window.
type PodsSteady struct {
	Window time.Duration
	// Changes are the Pod changes a watch of the harness saw in the window: the rate the
	// cluster sustained. Published are the messages the contender stored in the window.
	Changes, Published int
	// CPU is the contender's CPU seconds in the window; RSS and PeakRSS its VmRSS and VmHWM
	// at the end.
	CPU          float64
	RSS, PeakRSS int64
	// Own is the relay's own latency over the window (pipeline_lag_seconds).
	Own Percentiles `json:",omitzero"`
	Err string      `json:",omitempty"`
}

// PodsTable is the pods scenario's figures: medians over rounds.
type PodsTable struct {
	Pods, Nodes               int
	BodyMin, BodyAvg, BodyMax int
	ChurnPeriod               time.Duration
	ChurnAsked                float64
	Window                    time.Duration
	Sync                      []ThroughputRow
	Steady                    []PodsSteadyRow
	Secrets                   []SecretsRow `json:",omitempty"`
	// SecretsBase is the peak RSS of the relay over an empty namespace, as the budget's base.
	SecretsBase int64 `json:",omitempty"`
}

// PodsSteadyRow summarises one contender's steady windows.
type PodsSteadyRow struct {
	Contender string
	OK, Total int
	Err       string `json:",omitempty"`
	// Achieved is the cluster's Pod changes per second; Published the contender's messages
	// per second.
	Achieved, Published float64
	Own50, Own90, Own99 time.Duration
	// OwnN is the number of observations of the relay's own latency over every window.
	OwnN      int
	CPUPer10k float64
	// CPUCores is the contender's CPU in cores over the window.
	CPUCores     float64
	RSS, PeakRSS float64
}

// SecretsRow summarises the relay's runs over the large Secrets of one kind.
type SecretsRow struct {
	What      string
	OK, Total int
	Err       string `json:",omitempty"`
	Objects   int
	// ObjectBytes is each Secret's approximate JSON size.
	ObjectBytes int
	// SyncTook is from the relay's start to its checkpoint; EventsPerSec and MBPerSec are the
	// Secrets and their bytes (10^6) over it.
	SyncTook               time.Duration
	EventsPerSec, MBPerSec float64
	Budget, PeakRSS        float64
	// PeakRatio is peak RSS ÷ (budget + base); UnderLimit compares the peak with the chart's
	// memory limit.
	PeakRatio  float64 `json:",omitempty"`
	UnderLimit bool
}

// summarizePods computes the pods scenario's table.
func summarizePods(p *Pods) *PodsTable {
	t := &PodsTable{Pods: p.Pods, Nodes: p.Nodes, BodyMin: p.BodyMin, BodyAvg: p.BodyAvg, BodyMax: p.BodyMax,
		ChurnPeriod: p.ChurnPeriod, ChurnAsked: p.ChurnAsked, Window: p.Window}
	relay := summarize(Relay, syncRuns(p.Runs[Relay]), p.Pods)
	for _, c := range reportContenders {
		runs := p.Runs[c]
		if len(runs) == 0 {
			continue
		}
		row := summarize(c, syncRuns(runs), p.Pods)
		if row.OK == 0 {
			row.Err = firstErr(syncRuns(runs))
		} else if c != Relay && relay.OK > 0 {
			row.RelayRatio = relay.Rate / row.Rate
		}
		t.Sync = append(t.Sync, row)
		t.Steady = append(t.Steady, summarizePodsSteady(c, runs))
	}
	t.SecretsBase, t.Secrets = summarizeSecrets(p.Secrets)
	return t
}

func syncRuns(runs []PodsRun) []TimedRun {
	out := make([]TimedRun, len(runs))
	for i, r := range runs {
		out[i] = r.Sync
	}
	return out
}

func summarizePodsSteady(contender string, runs []PodsRun) PodsSteadyRow {
	row := PodsSteadyRow{Contender: contender, Total: len(runs)}
	var ach, pub, cpu, cores, rss, peak []float64
	var o50, o90, o99 []time.Duration
	for _, r := range runs {
		s := r.Steady
		if s.Err != "" || s.Window <= 0 {
			if row.Err == "" {
				row.Err = oneLine(s.Err)
			}
			continue
		}
		row.OK++
		ach = append(ach, float64(s.Changes)/s.Window.Seconds())
		pub = append(pub, float64(s.Published)/s.Window.Seconds())
		cores = append(cores, s.CPU/s.Window.Seconds())
		if s.Published > 0 {
			cpu = append(cpu, s.CPU/float64(s.Published)*10000)
		}
		rss, peak = append(rss, float64(s.RSS)), append(peak, float64(s.PeakRSS))
		if s.Own.N > 0 {
			o50, o90, o99 = append(o50, s.Own.P50), append(o90, s.Own.P90), append(o99, s.Own.P99)
			row.OwnN += s.Own.N
		}
	}
	if row.OK == 0 {
		return row
	}
	row.Err = ""
	row.Achieved, row.Published = median(ach), median(pub)
	row.CPUPer10k, row.CPUCores = median(cpu), median(cores)
	row.RSS, row.PeakRSS = median(rss), median(peak)
	row.Own50, row.Own90, row.Own99 = medianDuration(o50), medianDuration(o90), medianDuration(o99)
	return row
}

// summarizeSecrets returns the base run's peak RSS and one row per kind of Secrets run, in
// the order they first ran.
func summarizeSecrets(runs []BudgetRun) (int64, []SecretsRow) {
	base := (&Budget{Runs: runs}).base()
	var order []string
	byWhat := map[string][]BudgetRun{}
	for _, r := range runs {
		if r.Objects == 0 {
			continue
		}
		if _, ok := byWhat[r.What]; !ok {
			order = append(order, r.What)
		}
		byWhat[r.What] = append(byWhat[r.What], r)
	}
	var rows []SecretsRow
	for _, what := range order {
		row := SecretsRow{What: what, Total: len(byWhat[what])}
		var took []time.Duration
		var budget, peak []float64
		for _, r := range byWhat[what] {
			row.Objects, row.ObjectBytes = r.Objects, r.ObjectBytes
			if r.Err != "" || r.SyncTook <= 0 {
				if row.Err == "" {
					row.Err = oneLine(r.Err)
				}
				continue
			}
			row.OK++
			took = append(took, r.SyncTook)
			budget, peak = append(budget, float64(r.Budget)), append(peak, float64(r.PeakRSS))
		}
		if row.OK > 0 {
			row.Err = ""
			row.SyncTook = medianDuration(took)
			row.EventsPerSec = float64(row.Objects) / row.SyncTook.Seconds()
			row.MBPerSec = float64(row.Objects) * float64(row.ObjectBytes) / 1e6 / row.SyncTook.Seconds()
			row.Budget, row.PeakRSS = median(budget), median(peak)
			if base > 0 && row.Budget > 0 {
				row.PeakRatio = row.PeakRSS / (row.Budget + float64(base))
			}
			row.UnderLimit = row.PeakRSS < chartMemoryLimit
		}
		rows = append(rows, row)
	}
	return base, rows
}

package bench

import (
	"fmt"
	"slices"
	"time"
)

// Summaries over rounds: medians of the successful runs of each contender.

// throughputStats summarises one contender's runs of a throughput scenario.
type throughputStats struct {
	ok, total        int
	took             time.Duration
	rate, minR, maxR float64
	cpuPer10k        float64
	firstAt, ckptAt  time.Duration
	peakRSS          float64
	natsCPU, kubeCPU float64
	harnessCPU       float64
	// otherCores is the CPU other work on the machine used during the run, in cores.
	otherCores float64
	published  int
	relisted   int
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
func summarize(runs []TimedRun, basis int) throughputStats {
	s := throughputStats{total: len(runs)}
	var took, first, ckpt []time.Duration
	var rates, cpu, rss, natsCPU, kubeCPU, harness, other []float64
	for _, r := range runs {
		if r.Err != "" || r.Took <= 0 {
			continue
		}
		s.ok++
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
		if r.PeakRSS > 0 {
			rss = append(rss, float64(r.PeakRSS))
		}
		natsCPU = append(natsCPU, r.ServerCPU["nats-server"])
		kubeCPU = append(kubeCPU, r.ServerCPU["kube-apiserver"]+r.ServerCPU["etcd"])
		harness = append(harness, r.ServerCPU[cpuHarness])
		other = append(other, others(r.ServerCPU, r.CPU, r.Took))
		s.published = r.Published
		if r.Relisted {
			s.relisted++
		}
	}
	if s.ok == 0 {
		return s
	}
	s.took, s.rate = medianDuration(took), median(rates)
	s.minR, s.maxR = slices.Min(rates), slices.Max(rates)
	s.cpuPer10k, s.peakRSS = median(cpu), median(rss)
	s.firstAt, s.ckptAt = medianDuration(first), medianDuration(ckpt)
	s.natsCPU, s.kubeCPU = median(natsCPU), median(kubeCPU)
	s.harnessCPU, s.otherCores = median(harness), median(other)
	return s
}

// latencyStats summarises one contender's steady-state windows.
type latencyStats struct {
	ok, total                          int
	achieved                           float64
	e2e50, e2e99, add50, add99, e2eMax time.Duration
	own50, own99                       time.Duration
	ownN                               int
	missing                            int
	cpuPer10k, natsPer10k              float64
	otherCores                         float64
}

func summarizeLatency(runs []LatencyRun) latencyStats {
	s := latencyStats{total: len(runs)}
	var ach, cpu, natsCPU, other []float64
	var e50, e99, a50, a99, emax, o50, o99 []time.Duration
	for _, r := range runs {
		if r.Err != "" || r.Writes == 0 {
			continue
		}
		s.ok++
		ach = append(ach, r.Achieved)
		e50, e99, emax = append(e50, r.E2E.P50), append(e99, r.E2E.P99), append(emax, r.E2E.Max)
		if r.Added.N > 0 {
			a50, a99 = append(a50, r.Added.P50), append(a99, r.Added.P99)
		}
		if r.Own.N > 0 {
			o50, o99 = append(o50, r.Own.P50), append(o99, r.Own.P99)
			s.ownN += r.Own.N
		}
		s.missing += r.Missing
		if r.CPU > 0 {
			cpu = append(cpu, r.CPU/float64(r.Writes)*10000)
		}
		natsCPU = append(natsCPU, r.ServerCPU["nats-server"]/float64(r.Writes)*10000)
		other = append(other, others(r.ServerCPU, r.CPU, r.Window))
	}
	if s.ok == 0 {
		return s
	}
	s.achieved = median(ach)
	s.e2e50, s.e2e99, s.e2eMax = medianDuration(e50), medianDuration(e99), medianDuration(emax)
	s.add50, s.add99 = medianDuration(a50), medianDuration(a99)
	s.own50, s.own99 = medianDuration(o50), medianDuration(o99)
	s.cpuPer10k, s.natsPer10k = median(cpu), median(natsCPU)
	s.otherCores = median(other)
	return s
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

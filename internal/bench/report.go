package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// renderResults writes the Markdown section of one run: machine, targets, one table per
// scenario, profiles, micro-benchmarks and notes.
func renderResults(r *Results, jsonPath string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	title := "Full run (the issue's sizes)"
	if r.Mode == ModeQuick {
		title = "Quick run (reduced sizes: QUICK-MODE NUMBERS, not comparable with the issue's targets)"
	}
	w("## %s\n\n", title)
	w("- Date: %s to %s (UTC)\n", r.Started.Format("2006-01-02 15:04"), r.Finished.Format("15:04"))
	w("- Command: `%s`\n", r.Command)
	if len(r.Measured) > 0 {
		var ms []string
		for _, m := range r.Measured {
			ms = append(ms, m.Name+": "+m.Value)
		}
		w("- Scenarios measured: %s\n", strings.Join(ms, "; "))
	}
	m := r.Machine
	w("- Machine: %d CPUs (%s), %s memory, Linux %s, %s; shared with other work while measured\n",
		m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.GoVer)
	for _, v := range m.Versions {
		if v.Name == "relay" && len(r.Measured) > 0 {
			w("- relay: %s (this run; each scenario's revision is in the line above)\n", v.Value)
			continue
		}
		w("- %s: %s\n", v.Name, v.Value)
	}
	c := r.Config
	w("- Sizes: %d rounds; initial sync %s objects; catch-up %s changes; steady %v changes/s for %s over %s objects; memory at %s objects (settle %s); objects of about %d bytes; %d writers\n",
		c.Rounds, fmtCount(c.SyncObjects), fmtCount(c.CatchupChanges), c.SteadyRates, c.SteadyDuration,
		fmtCount(c.SteadyObjects), joinCounts(c.MemoryObjects), c.Settle, c.ObjectBytes, c.Writers)
	if len(r.Load) > 0 {
		var ls []string
		for _, l := range r.Load {
			ls = append(ls, l.Name+" "+l.Value)
		}
		w("- Load average (1, 5, 15 min) before → after each scenario: %s\n", strings.Join(ls, "; "))
	}
	w("- Raw results: [`%s`](%s)\n\n", jsonPath, strings.TrimPrefix(jsonPath, "docs/"))

	if len(r.Setup) > 0 {
		w("Preparation (the cluster's own write rate on this machine):\n\n| step | objects | rate | took |\n|---|---:|---:|---:|\n")
		for _, s := range r.Setup {
			w("| %s | %s | %.0f/s | %s |\n", s.What, fmtCount(s.N), s.Rate, fmtDur(s.Took))
		}
		w("\n")
	}
	renderTargets(&b, r)
	if r.Sync != nil {
		w("### 1. Initial sync: %s ConfigMaps, time until every event is acknowledged\n\n", fmtCount(r.Sync.Events))
		w("Average message %d bytes (subject, headers, body). Medians over rounds; \"relay ÷\" is the relay's rate divided by the row's.\n\n", r.Sync.MsgBytes)
		renderThroughput(&b, r.Sync, "events/s")
	}
	for _, cu := range r.Catchup {
		w("### 2. Catch-up (%s): %s changes made while the relay was stopped, time from start until all are acknowledged\n\n", historyTitle(cu.History), fmtCount(cu.Events))
		w("Changes written at %.0f/s (median) right after the relay stopped. The naive relay has no checkpoint: it republishes every object (the changed ones among them), so its time is to its last publish. Rates are changes per second for every row. A relay run marked relisted could not resume from its checkpoint (410 Gone) and caught up by relisting and diffing against its index.\n\n", cu.WriteRate)
		renderThroughput(&b, cu, "changes/s")
	}
	for _, st := range r.Steady {
		renderSteady(&b, st)
	}
	if r.Memory != nil {
		renderMemory(&b, r)
	}
	if r.Budget != nil {
		renderBudget(&b, r)
	}
	if r.Profile != nil && len(r.Profile.Files) > 0 {
		w("### Profiles\n\n")
		for _, f := range r.Profile.Files {
			w("<details><summary>%s: <code>%s</code></summary>\n\n```\n%s\n```\n</details>\n\n", f.What, f.Path, f.Top)
		}
	}
	if len(r.Micro) > 0 {
		w("### Micro-benchmarks (`go test -bench . -benchmem`, median of %d runs)\n\n", r.Micro[0].Runs)
		w("| package | benchmark | ns/op | B/op | allocs/op | other |\n|---|---|---:|---:|---:|---|\n")
		for _, mb := range r.Micro {
			var extra []string
			for _, k := range sortedKeys(mb.Extra) {
				extra = append(extra, fmt.Sprintf("%.4g %s", mb.Extra[k], k))
			}
			w("| %s | %s | %.0f | %.0f | %.0f | %s |\n", mb.Package, mb.Name, mb.NsPerOp, mb.BytesPerOp, mb.AllocsOp, strings.Join(extra, ", "))
		}
		w("\n")
	}
	if len(r.Notes) > 0 {
		w("### Notes from this run\n\n")
		for _, n := range r.Notes {
			w("- %s\n", strings.ReplaceAll(n, "\n", " "))
		}
		w("\n")
	}
	return b.String()
}

func renderThroughput(b *strings.Builder, t *Throughput, unit string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	relay := summarize(t.Runs[Relay], t.Events)
	w("| contender | ok rounds | time (median) | %s (median) | %s (min–max) | relay ÷ | CPU s per 10k events | first event at | relay checkpoint at | CPU s: nats-server / apiserver+etcd / harness | other load (cores) | peak RSS |\n", unit, unit)
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range syncContenders {
		s := summarize(t.Runs[c], t.Events)
		if s.total == 0 {
			continue
		}
		if s.ok == 0 {
			w("| %s | 0/%d | failed: %s | | | | | | | | | |\n", c, s.total, firstErr(t.Runs[c]))
			continue
		}
		ratio := "–"
		if c != Relay && relay.ok > 0 {
			ratio = fmt.Sprintf("%.2f", relay.rate/s.rate)
		}
		name := c
		if s.published > 0 {
			name += fmt.Sprintf(" (published %s)", fmtCount(s.published))
		}
		if s.relisted > 0 {
			name += fmt.Sprintf(" (relisted in %d of %d rounds)", s.relisted, s.ok)
		}
		w("| %s | %d/%d | %s | %.0f | %.0f–%.0f | %s | %s | %s | %s | %.1f / %.1f / %.1f | %.2f | %s |\n", name, s.ok, s.total,
			fmtDur(s.took), s.rate, s.minR, s.maxR, ratio, fmtOpt(s.cpuPer10k, "%.2f"), fmtOptDur(s.firstAt),
			fmtOptDur(s.ckptAt), s.natsCPU, s.kubeCPU, s.harnessCPU, s.otherCores, fmtOptBytes(s.peakRSS))
	}
	w("\n")
}

func renderSteady(b *strings.Builder, st *Steady) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### 3. Steady state at %d changes/s for %s\n\n", st.Rate, st.Duration)
	w("End-to-end: from the write's response to the consumer's receipt (ceiling: from the publish call; raw watch: to the watch's receipt). Added: from the raw watch's receipt of the same change to the consumer's receipt. Own: the relay's own latency from its metrics, a change's receipt to its JetStream ack (`pipeline_lag_seconds`, interpolated inside histogram buckets). Medians over rounds of each round's percentile.\n\n")
	w("| contender | ok rounds | achieved rate | e2e p50 | e2e p99 | e2e max | added p50 | added p99 | own p50 | own p99 | missing | CPU s per 10k events | nats-server CPU s per 10k events | other load (cores) |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range contenders {
		s := summarizeLatency(st.Runs[c])
		if s.total == 0 {
			continue
		}
		if s.ok == 0 {
			w("| %s | 0/%d | failed: %s | | | | | | | | | | | |\n", c, s.total, firstLatencyErr(st.Runs[c]))
			continue
		}
		added50, added99, own50, own99 := "–", "–", "–", "–"
		if c == Relay || c == Naive {
			added50, added99 = ms(s.add50), ms(s.add99)
		}
		if s.ownN > 0 {
			own50, own99 = ms(s.own50), ms(s.own99)
		}
		w("| %s | %d/%d | %.0f/s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %.2f | %.2f |\n", c, s.ok, s.total, s.achieved,
			ms(s.e2e50), ms(s.e2e99), ms(s.e2eMax), added50, added99, own50, own99, s.missing, fmtOpt(s.cpuPer10k, "%.2f"), s.natsPer10k, s.otherCores)
	}
	w("\n")
}

func renderMemory(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	mem := r.Memory
	w("### 4. Memory and CPU per watched object\n\n")
	w("Each process synced the objects, idled %s, then: RSS = VmRSS, peak = VmHWM (/proc/<pid>/status); live heap = the last GC's marked heap from GODEBUG=gctrace=1 (whole MB; marked when that GC ran after the sync, so without the sync's working set); engine heap = the relay's engine run in the harness process, runtime HeapAlloc after two full GCs minus the same before it started (exact). One run per size.\n\n", r.Config.Settle)
	w("| contender | objects | RSS | peak RSS | live heap (gctrace) | engine heap (exact) | sync time | CPU s per 10k events |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range mem.Runs {
		if run.Err != "" {
			w("| %s | %s | failed: %s | | | | | |\n", run.Contender, fmtCount(run.Objects), run.Err)
			continue
		}
		heap, engine, cpu := "–", "–", "–"
		if run.GCs > 0 {
			heap = fmt.Sprintf("%d MB", run.HeapLiveMB)
			switch {
			case run.HeapForced && run.HeapAfterSync:
				heap += " (idle-forced GC)"
			case run.HeapAfterSync:
				heap += " (GC after sync)"
			}
		}
		if run.HeapBytes != 0 {
			engine = fmtBytes(float64(run.HeapBytes))
		}
		if run.SyncCPU > 0 {
			cpu = fmt.Sprintf("%.2f", run.SyncCPU/float64(run.Objects)*10000)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", run.Contender, fmtCount(run.Objects), fmtOptBytes(float64(run.RSS)),
			fmtOptBytes(float64(run.PeakRSS)), heap, engine, fmtDur(run.SyncTook), cpu)
	}
	w("\n")
	sizes := r.Config.MemoryObjects
	type fig struct {
		contender, what string
		f               func(MemoryRun) float64
	}
	var lines []string
	for _, f := range []fig{
		{"relay-engine", "engine heap", func(m MemoryRun) float64 { return float64(m.HeapBytes) }},
		{Relay, "relay live heap (gctrace)", func(m MemoryRun) float64 { return float64(m.HeapLiveMB) * (1 << 20) }},
		{Relay, "relay RSS", func(m MemoryRun) float64 { return float64(m.RSS) }},
		{Naive, "naive live heap (gctrace)", func(m MemoryRun) float64 { return float64(m.HeapLiveMB) * (1 << 20) }},
		{Naive, "naive RSS", func(m MemoryRun) float64 { return float64(m.RSS) }},
	} {
		if v, how, ok := mem.perObject(f.contender, sizes, f.f); ok {
			lines = append(lines, fmt.Sprintf("| %s | %.0f | %s |", f.what, v, how))
		}
	}
	if len(lines) > 0 {
		w("Bytes per watched object (growth between the sizes, so fixed costs cancel):\n\n| figure | bytes per object | computed as |\n|---|---:|---|\n%s\n\n", strings.Join(lines, "\n"))
	}
}

// renderTargets evaluates the targets against this run's medians.
func renderTargets(b *strings.Builder, r *Results) {
	type row struct{ target, measured, verdict string }
	var rows []row
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
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
		rel, ceil, nai := summarize(sc.t.Runs[Relay], sc.t.Events), summarize(sc.t.Runs[Ceiling], sc.t.Events), summarize(sc.t.Runs[Naive], sc.t.Events)
		if rel.ok > 0 && ceil.ok > 0 {
			x := rel.rate / ceil.rate
			rows = append(rows, row{sc.name + ": at least half the ceiling's rate", fmt.Sprintf("%.0f vs %.0f/s = %.2f× the ceiling", rel.rate, ceil.rate, x), verdict(x >= 0.5)})
		}
		if rel.ok > 0 && nai.ok > 0 {
			x := rel.rate / nai.rate
			rows = append(rows, row{sc.name + ": at least 5× the naive relay", fmt.Sprintf("%.0f vs %.0f/s = %.2f×", rel.rate, nai.rate, x), verdict(x >= 5)})
		}
	}
	for _, st := range r.Steady {
		if st.Rate != 1000 {
			continue
		}
		if s := summarizeLatency(st.Runs[Relay]); s.ok > 0 {
			p99 := s.add99
			measured := fmt.Sprintf("%s (p50 %s; upper bound, see method) at %.0f changes/s achieved", ms(s.add99), ms(s.add50), s.achieved)
			if s.ownN > 0 {
				p99 = s.own99
				measured = fmt.Sprintf("%s (p50 %s) from the relay's metrics; %s from outside (upper bound, see method); at %.0f changes/s achieved",
					ms(s.own99), ms(s.own50), ms(s.add99), s.achieved)
			}
			v := verdict(p99 < 5*time.Millisecond)
			if s.achieved < 0.9*float64(st.Rate) {
				v = fmt.Sprintf("not measurable here: the cluster sustained only %.0f changes/s (%s at that rate)", s.achieved, v)
			}
			rows = append(rows, row{"relay-added latency p99 under 5 ms at 1,000 changes/s", measured, v})
		}
	}
	if mem := r.Memory; mem != nil {
		sizes := r.Config.MemoryObjects
		if v, _, ok := mem.perObject("relay-engine", sizes, func(m MemoryRun) float64 { return float64(m.HeapBytes) }); ok {
			rows = append(rows, row{"index cost under 300 bytes per watched object", fmt.Sprintf("%.0f bytes per object (engine heap growth)", v), verdict(v < 300)})
		}
		if run, ok := mem.find(Relay, 100000); ok {
			rows = append(rows, row{"RSS under 150 MB at 100,000 objects", fmtBytes(float64(run.RSS)), verdict(run.RSS < 150<<20)})
		} else if slices.Max(sizes) < 100000 {
			big := slices.Max(sizes)
			if run, ok := mem.find(Relay, big); ok {
				rows = append(rows, row{"RSS under 150 MB at 100,000 objects", fmt.Sprintf("not measured at 100,000; %s at %s", fmtBytes(float64(run.RSS)), fmtCount(big)), "n/a"})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### Targets\n\n| target | measured (medians) | verdict |\n|---|---|---|\n")
	for _, x := range rows {
		fmt.Fprintf(b, "| %s | %s | %s |\n", x.target, x.measured, x.verdict)
	}
	b.WriteString("\n")
}

// historyTitle names where a catch-up's history came from.
func historyTitle(h string) string {
	switch h {
	case HistoryWatchCache:
		return "history from the apiserver's watch cache, the default"
	case HistoryEtcd:
		return "history from etcd: apiserver without watch cache for configmaps"
	}
	return h
}

func firstErr(runs []TimedRun) string {
	for _, r := range runs {
		if r.Err != "" {
			return oneLine(r.Err)
		}
	}
	return ""
}

func firstLatencyErr(runs []LatencyRun) string {
	for _, r := range runs {
		if r.Err != "" {
			return oneLine(r.Err)
		}
	}
	return ""
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, "|", "/")
}

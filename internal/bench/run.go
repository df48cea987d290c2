package bench

import (
	"context"
	"fmt"
	"time"
)

// Run measures the scenarios cfg selects and returns what it measured. save is called with
// the results so far after each scenario, so that an interrupted or partly failed run still
// leaves its numbers behind. A scenario that fails is noted in Results.Notes and the run
// goes on with the next; only cancellation of ctx ends it early.
func Run(ctx context.Context, cfg Config, save func(*Results) error) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &Results{
		Mode:    cfg.Mode,
		Command: cfg.Command,
		Started: time.Now().UTC(),
		Config: ConfigSummary{
			Rounds: cfg.Rounds, SyncObjects: cfg.SyncObjects, CatchupChanges: cfg.CatchupChanges,
			SteadyObjects: cfg.SteadyObjects, SteadyRates: cfg.SteadyRates, SteadyDuration: cfg.SteadyDuration,
			SweepObjects: cfg.SweepObjects, SweepRounds: cfg.SweepRounds,
			MemoryObjects: cfg.MemoryObjects, BudgetSecrets: cfg.BudgetSecrets, BudgetObjects: cfg.BudgetObjects, Settle: cfg.Settle, ObjectBytes: cfg.ObjectBytes,
			Writers: cfg.Writers, Scenarios: cfg.Scenarios,
			Pods: cfg.Pods, PodChurnPeriod: cfg.PodChurnPeriod, PodsWindow: cfg.PodsWindow,
		},
	}
	res.Machine = describeMachine(ctx, cfg)
	checkpoint := func() error {
		res.Finished = time.Now().UTC()
		return save(res)
	}
	note := func(scenario string, err error) {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %v", scenario, err))
		cfg.logf("%s FAILED: %v", scenario, err)
	}

	needsCluster := false
	for _, s := range []string{ScenarioSync, ScenarioCatchup, ScenarioSteady, ScenarioSweep, ScenarioMemory, ScenarioBudget, ScenarioProfile, ScenarioPods} {
		needsCluster = needsCluster || cfg.runs(s)
	}
	if needsCluster {
		if err := runCluster(ctx, cfg, res, note, checkpoint); err != nil {
			return res, err
		}
	}
	if cfg.runs(ScenarioMicro) {
		cfg.logf("micro-benchmarks (-count %d)", cfg.MicroCount)
		micro, err := runMicro(ctx, cfg)
		if err != nil {
			note(ScenarioMicro, err)
		}
		res.Micro = micro
		res.Measured = append(res.Measured, KV{ScenarioMicro, provenance(res, cfg)})
	}
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	return res, checkpoint()
}

// runCluster runs the scenarios that need the test bed.
func runCluster(ctx context.Context, cfg Config, res *Results, note func(string, error), checkpoint func() error) error {
	cfg.logf("starting etcd, kube-apiserver and nats-server")
	e, err := StartEnv(ctx, cfg)
	if err != nil {
		return fmt.Errorf("start the test bed: %w", err)
	}
	defer e.Stop()
	defer func() { res.Setup = e.setup }()

	create := func(ns string, n int) error {
		start := time.Now()
		rate, err := e.createObjects(ctx, ns, 0, n)
		if err != nil {
			return err
		}
		e.noteSetup("create ConfigMaps in "+ns, n, rate, time.Since(start))
		return nil
	}
	if cfg.runs(ScenarioSync) || cfg.runs(ScenarioCatchup) || cfg.runs(ScenarioProfile) {
		if err := create(nsSync, cfg.SyncObjects); err != nil {
			return err
		}
	}
	if cfg.runs(ScenarioSteady) || cfg.runs(ScenarioProfile) {
		if err := create(nsSteady, cfg.SteadyObjects); err != nil {
			return err
		}
	}
	// The memory scenario runs last: its objects would otherwise weigh on the apiserver
	// (its watch cache holds every ConfigMap) during the other scenarios.
	steps := []struct {
		name string
		run  func() error
	}{
		{ScenarioSync, func() (err error) { res.Sync, err = e.runSync(ctx); return err }},
		{ScenarioCatchup, func() (err error) { res.Catchup, err = e.runCatchup(ctx); return err }},
		{ScenarioSteady, func() (err error) { res.Steady, err = e.runSteady(ctx); return err }},
		{ScenarioProfile, func() (err error) { res.Profile, err = e.runProfile(ctx); return err }},
		// Before memory, for the same reason: its namespace weighs less than memory's.
		{ScenarioSweep, func() (err error) { res.Sweep, err = e.runSweep(ctx); return err }},
		{ScenarioMemory, func() (err error) {
			last := cfg.MemoryObjects[len(cfg.MemoryObjects)-1]
			var heapFile string
			res.Memory, err = e.runMemory(ctx, func(size int) string {
				if !cfg.runs(ScenarioProfile) || size != last {
					return ""
				}
				heapFile = e.profilePath(fmt.Sprintf("memory-%d.heap.pprof", size))
				return heapFile
			})
			if heapFile != "" && err == nil {
				if res.Profile == nil {
					res.Profile = &Profile{}
				}
				res.Profile.Files = append(res.Profile.Files, e.profileFile(ctx,
					fmt.Sprintf("heap in use after the engine synced %d objects (runtime heap profile)", last), heapFile, false))
			}
			return err
		}},
		// After memory: it reuses (and tops up) the memory scenario's ConfigMaps.
		{ScenarioBudget, func() (err error) { res.Budget, err = e.runBudget(ctx); return err }},
		// Last: it starts the controllers, whose Pods stay in the control plane.
		{ScenarioPods, func() (err error) { res.Pods, err = e.runPods(ctx); return err }},
	}
	for _, s := range steps {
		if !cfg.runs(s.name) {
			continue
		}
		cfg.logf("scenario %s (load average %s)", s.name, loadAvg())
		before := loadAvg()
		err := s.run()
		res.Load = append(res.Load, KV{s.name, before + " → " + loadAvg()})
		res.Measured = append(res.Measured, KV{s.name, provenance(res, cfg)})
		res.Setup = e.setup
		if ctx.Err() != nil {
			_ = checkpoint()
			return context.Cause(ctx)
		}
		if err != nil {
			note(s.name, err)
		}
		if err := checkpoint(); err != nil {
			return fmt.Errorf("save results: %w", err)
		}
	}
	return nil
}

// provenance says when, by which command and at which relay revision a scenario was measured:
// a run of some scenarios keeps the others' numbers, which may come from another revision.
func provenance(res *Results, cfg Config) string {
	p := res.Started.Format("2006-01-02 15:04 UTC") + ", " + cfg.Command
	for _, v := range res.Machine.Versions {
		if v.Name == Relay || v.Name == RelayBefore {
			p += ", " + v.Name + " " + v.Value
		}
	}
	return p
}

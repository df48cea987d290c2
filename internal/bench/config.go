package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Modes.
const (
	ModeFull  = "full"
	ModeQuick = "quick"
)

// Scenarios, in the order they run.
const (
	ScenarioSync    = "sync"
	ScenarioCatchup = "catchup"
	ScenarioSteady  = "steady"
	ScenarioMemory  = "memory"
	ScenarioBudget  = "budget"
	ScenarioProfile = "profile"
	// ScenarioSweep is the initial sync at several object counts, for the plot of rate
	// against object count.
	ScenarioSweep = "sweep"
	ScenarioMicro = "micro"
	ScenarioPods  = "pods"
)

// AllScenarios lists every scenario in run order. The pods scenario is the last that runs on
// the cluster: its Pods, nodes and controllers stay in the control plane once it has run.
var AllScenarios = []string{ScenarioSync, ScenarioCatchup, ScenarioSteady, ScenarioSweep, ScenarioMemory, ScenarioBudget, ScenarioProfile, ScenarioPods, ScenarioMicro}

// Config sizes a benchmark run. FullConfig has the sizes of issue 7; QuickConfig scales them
// down so that a run takes a few minutes on a shared 2-core machine.
type Config struct {
	// Mode is ModeFull or ModeQuick; it names the section of docs/benchmarks.md the results
	// go to.
	Mode string
	// Rounds is how many times each contender runs each throughput and latency scenario,
	// alternating with the others; reported numbers are medians over rounds.
	Rounds int
	// SyncObjects is the number of ConfigMaps the initial sync reads and publishes.
	SyncObjects int
	// CatchupChanges is the number of changes made while the relay is stopped.
	CatchupChanges int
	// CatchupHistory lists where the catch-up's watch history comes from: HistoryWatchCache
	// (the apiserver's default) and HistoryEtcd (a second control plane without watch cache
	// for configmaps).
	CatchupHistory []string
	// SteadyObjects is the number of ConfigMaps the steady-state writes cycle through.
	SteadyObjects int
	// SteadyRates are the write rates (changes per second) of the steady-state scenario.
	SteadyRates []int
	// SteadyDuration is how long each steady-state window writes.
	SteadyDuration time.Duration
	// SweepObjects are the object counts of the sweep, ascending; SweepRounds how many times
	// each contender syncs each of them (the sweep gives a curve's shape, the initial sync
	// scenario its precise point).
	SweepObjects []int
	SweepRounds  int
	// MemoryObjects are the numbers of watched objects memory is measured at, ascending.
	MemoryObjects []int
	// BudgetSecrets is the number of Secrets of about 870 KB the budget scenario relays from
	// one namespace; BudgetObjects the number of small ConfigMaps it relays.
	BudgetSecrets, BudgetObjects int
	// Settle is how long a contender sits idle after its sync before its memory is read. Go
	// forces a garbage collection after 2 minutes without one, so a settle above that makes
	// the GC trace's live heap the steady one, without the sync's transient garbage.
	Settle time.Duration
	// ObjectBytes is the approximate size of each ConfigMap's JSON without managedFields.
	ObjectBytes int
	// Writers is the number of concurrent writers creating and updating objects.
	Writers int
	// RunTimeout bounds one contender run; a run that exceeds it is reported as timed out.
	RunTimeout time.Duration
	// Scenarios lists what to run (AllScenarios by default).
	Scenarios []string
	// MicroCount is -count for the Go micro-benchmarks.
	MicroCount int
	// Pods is the size of the pods scenario's Deployment; PodChurnPeriod the mean cycle of
	// each Pod's status churn (podchurn.go); PodsWindow how long each contender's steady
	// state is measured.
	Pods           int
	PodChurnPeriod time.Duration
	PodsWindow     time.Duration

	// RelayBin is the relay binary to measure.
	RelayBin string
	// BaselineBin is the relay built from another revision (-baseline), measured as
	// RelayBefore beside the relay in every scenario but the budget; empty for none.
	// Baseline names it for the report.
	BaselineBin, Baseline string
	// RelayGiven says RelayBin was given (-relay) rather than built from the working tree,
	// so the report names it by its own --version, not by the tree's commit.
	RelayGiven bool
	// SelfBin is the harness binary, which runs the naive relay as a subcommand.
	SelfBin string
	// RepoRoot is the module root: micro-benchmarks run there, results are written there.
	RepoRoot string
	// Out is the Markdown report, ArtifactDir the directory of JSON results and profiles.
	Out, ArtifactDir string
	// LogDir keeps contender logs.
	LogDir string
	// Command is how the run was invoked, for the report.
	Command string
	// Log receives progress lines.
	Log io.Writer
}

// FullConfig returns the sizes of issue 7.
func FullConfig() Config {
	return Config{
		Mode:           ModeFull,
		Rounds:         3,
		SyncObjects:    50000,
		CatchupChanges: 20000,
		CatchupHistory: []string{HistoryWatchCache, HistoryEtcd},
		SteadyObjects:  1000,
		SteadyRates:    []int{200, 1000},
		SteadyDuration: 30 * time.Second,
		SweepObjects:   []int{5000, 10000, 25000, 50000},
		SweepRounds:    1,
		MemoryObjects:  []int{10000, 100000},
		BudgetSecrets:  120,
		BudgetObjects:  100000,
		Settle:         130 * time.Second,
		ObjectBytes:    1024,
		Writers:        32,
		RunTimeout:     10 * time.Minute,
		Scenarios:      AllScenarios,
		MicroCount:     6,
		// 10,000 Pods of the issue, each cycling every minute: about 330 Pod updates/s,
		// a busy cluster's churn.
		Pods:           10000,
		PodChurnPeriod: time.Minute,
		PodsWindow:     30 * time.Second,
	}
}

// QuickConfig returns sizes for a run of a few minutes: a tenth of the objects, short
// windows, two rounds. Its numbers say whether everything works, not how fast it is.
func QuickConfig() Config {
	c := FullConfig()
	c.Mode = ModeQuick
	c.Rounds = 2
	c.SyncObjects = 5000
	c.CatchupChanges = 2000
	c.SteadyObjects = 500
	c.SteadyDuration = 5 * time.Second
	c.SweepObjects = []int{1000, 2500, 5000}
	c.MemoryObjects = []int{2000, 10000}
	c.BudgetObjects = 10000
	c.Settle = 5 * time.Second
	c.RunTimeout = 3 * time.Minute
	c.MicroCount = 3
	// A tenth of the Pods cycling six times as fast: about 200 updates/s.
	c.Pods = 1000
	c.PodChurnPeriod = 10 * time.Second
	c.PodsWindow = 10 * time.Second
	return c
}

// Validate reports every problem with the sizes at once.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Mode == ModeFull || c.Mode == ModeQuick, "mode %q: want %s or %s", c.Mode, ModeFull, ModeQuick)
	check(c.Rounds >= 1, "rounds %d: want at least 1", c.Rounds)
	check(c.SyncObjects >= 1, "sync objects %d: want at least 1", c.SyncObjects)
	check(c.CatchupChanges >= 1, "catch-up changes %d: want at least 1", c.CatchupChanges)
	for _, h := range c.CatchupHistory {
		check(h == HistoryWatchCache || h == HistoryEtcd, "catch-up history %q: want %s or %s", h, HistoryWatchCache, HistoryEtcd)
	}
	check(c.SteadyObjects >= 1, "steady objects %d: want at least 1", c.SteadyObjects)
	check(len(c.SteadyRates) > 0, "steady rates: want at least one")
	for _, r := range c.SteadyRates {
		check(r >= 1, "steady rate %d: want at least 1", r)
	}
	check(c.SteadyDuration > 0, "steady duration %s: want more than 0", c.SteadyDuration)
	check(len(c.SweepObjects) > 0 && slices.IsSorted(c.SweepObjects) && c.SweepObjects[0] >= 1,
		"sweep objects %v: want ascending sizes of at least 1", c.SweepObjects)
	check(c.SweepRounds >= 1, "sweep rounds %d: want at least 1", c.SweepRounds)
	check(len(c.MemoryObjects) > 0 && slices.IsSorted(c.MemoryObjects) && c.MemoryObjects[0] >= 1,
		"memory objects %v: want ascending sizes of at least 1", c.MemoryObjects)
	check(c.BudgetSecrets >= 1 && c.BudgetObjects >= 1, "budget secrets %d and objects %d: want at least 1 each", c.BudgetSecrets, c.BudgetObjects)
	check(c.ObjectBytes >= metadataBytes+16, "object bytes %d: want at least %d", c.ObjectBytes, metadataBytes+16)
	check(c.Writers >= 1, "writers %d: want at least 1", c.Writers)
	check(c.RunTimeout > 0, "run timeout %s: want more than 0", c.RunTimeout)
	check(c.Pods >= 1, "pods %d: want at least 1", c.Pods)
	check(c.PodChurnPeriod >= time.Second, "pod churn period %s: want at least 1s", c.PodChurnPeriod)
	check(c.PodsWindow > 0, "pods window %s: want more than 0", c.PodsWindow)
	for _, s := range c.Scenarios {
		check(slices.Contains(AllScenarios, s), "scenario %q: want one of %s", s, strings.Join(AllScenarios, ", "))
	}
	check(c.RelayBin != "", "relay binary: not set")
	check(c.SelfBin != "", "harness binary: not set")
	return errors.Join(errs...)
}

func (c Config) runs(scenario string) bool { return slices.Contains(c.Scenarios, scenario) }

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
}

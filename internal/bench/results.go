package bench

import (
	"slices"
	"sort"
	"time"
)

// Contenders.
const (
	Ceiling = "ceiling"
	// RawWatch is the bare watch of catch-up and steady state (the initial sync's references
	// are BareList, BareProto and MachineLimit).
	RawWatch = "raw-watch"
	Naive    = "naive"
	Relay    = "relay"
	// RelayBefore is the relay built from another revision (-baseline), measured in the
	// same rounds as the relay so that the report compares the two side by side.
	RelayBefore = "relay-before"
	// RelayEngine is the relay's engine run inside the harness (memory scenario).
	RelayEngine = "relay-engine"
)

// contenders in their first round's order; later rounds rotate it. A run with a baseline
// adds RelayBefore after the relay.
var contenders = []string{Ceiling, RawWatch, Naive, Relay}

// syncContenders are the initial sync's: the references of references.go instead of the raw
// watch, and the lean naive relay beside the naive one.
var syncContenders = []string{Ceiling, BareList, BareProto, MachineLimit, NaiveLean, Naive, Relay}

// contenders returns the contenders of the catch-up and steady scenarios of this run.
func (c Config) contenders() []string { return c.withBaseline(contenders) }

// syncContenders returns the contenders of this run's initial sync.
func (c Config) syncContenders() []string { return c.withBaseline(syncContenders) }

// relays returns the relay binaries this run measures: the relay, and the baseline's.
func (c Config) relays() []string { return c.withBaseline([]string{Relay}) }

func (c Config) withBaseline(cs []string) []string {
	if c.BaselineBin == "" {
		return cs
	}
	return append(slices.Clone(cs), RelayBefore)
}

// isRelay says the contender is the relay binary, of this tree or of the baseline.
func isRelay(contender string) bool { return contender == Relay || contender == RelayBefore }

// publishesFromKube says the contender relays the watched changes to the stream, so that its
// latency added to a raw watch's is measured.
func publishesFromKube(contender string) bool {
	return isRelay(contender) || contender == Naive || contender == NaiveLean
}

// rotate returns cs starting at position round, so that no contender always runs first (on a
// cold cache) or last (on a machine warmed or fragmented by the others). The relay and
// relay-before also swap places every other round: they stand side by side, and the one that
// ran second was measured up to 8% faster in its initial sync whichever binary it was, which
// would otherwise pass for a difference between the revisions: the relay goes first in even
// rounds, relay-before in odd ones.
func rotate(cs []string, round int) []string {
	out := make([]string, 0, len(cs))
	for i := range cs {
		out = append(out, cs[(i+round)%len(cs)])
	}
	i, j := slices.Index(out, Relay), slices.Index(out, RelayBefore)
	if i >= 0 && j >= 0 && (i < j) != (round%2 == 0) {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Results is everything one run measured.
type Results struct {
	Mode     string
	Command  string
	Started  time.Time
	Finished time.Time
	Machine  Machine
	Config   ConfigSummary
	Setup    []SetupStep
	Sync     *Throughput   `json:",omitempty"`
	Catchup  []*Throughput `json:",omitempty"`
	Steady   []*Steady     `json:",omitempty"`
	// Sweep is the initial sync at each of Config.SweepObjects, ascending.
	Sweep   []*Throughput `json:",omitempty"`
	Memory  *Memory       `json:",omitempty"`
	Budget  *Budget       `json:",omitempty"`
	Profile *Profile      `json:",omitempty"`
	Micro   []Micro       `json:",omitempty"`
	Pods    *Pods         `json:",omitempty"`
	// Load is the machine's load average (1, 5, 15 min) before and after each scenario.
	Load []KV
	// Measured says when and by which command each scenario's numbers were taken: a run of
	// some scenarios keeps the others' results from the previous run of the same mode.
	Measured []KV
	// Notes are anomalies worth a reader's attention: failures, timeouts, relists.
	Notes []string
	// Summary is every figure the report shows, computed from the runs above when the
	// results are saved: the Markdown report is rendered from it.
	Summary *Summary `json:",omitempty"`
}

// ConfigSummary is the part of Config that shapes the numbers.
type ConfigSummary struct {
	Rounds         int
	SyncObjects    int
	CatchupChanges int
	SteadyObjects  int
	SteadyRates    []int
	SteadyDuration time.Duration
	SweepObjects   []int `json:",omitempty"`
	SweepRounds    int   `json:",omitempty"`
	MemoryObjects  []int
	BudgetSecrets  int `json:",omitempty"`
	BudgetObjects  int `json:",omitempty"`
	Settle         time.Duration
	ObjectBytes    int
	Writers        int
	Scenarios      []string
	Pods           int           `json:",omitempty"`
	PodChurnPeriod time.Duration `json:",omitempty"`
	PodsWindow     time.Duration `json:",omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs     int
	CPUModel string
	MemTotal string
	Kernel   string
	GoVer    string
	// Versions of the servers, the relay and the client libraries.
	Versions []KV
}

// KV is one name and value of an ordered list.
type KV struct{ Name, Value string }

// SetupStep is one preparation step, with the rate the cluster sustained.
type SetupStep struct {
	What string
	N    int
	Rate float64
	Took time.Duration
}

// Throughput is a scenario measured as time to deliver a fixed number of events.
type Throughput struct {
	// Events is what each contender must deliver (TimedRun.Events may differ, e.g. the naive
	// relay republishes every object after a stop).
	Events int
	// MsgBytes is the average message size (subject, headers, body) of the ceiling's payloads.
	MsgBytes int
	// WriteRate is the rate the changes were written at (catch-up only), median over rounds.
	WriteRate float64
	// History is where a catch-up's watch history came from (HistoryWatchCache, HistoryEtcd).
	History string `json:",omitempty"`
	Runs    map[string][]TimedRun
}

// TimedRun is one contender's run of a throughput scenario.
type TimedRun struct {
	Round  int
	Events int
	// Relisted says the relay could not resume from its checkpoint (410 Gone) and caught up
	// by relisting and diffing against its index.
	Relisted bool `json:",omitempty"`
	// Published is the number of messages the contender published when it differs from
	// Events (the naive relay's catch-up republishes every object).
	Published int `json:",omitempty"`
	// Took is from the start (process start, first publish, list or watch call) until every
	// event is acknowledged (stored in the stream) or read.
	Took time.Duration
	// FirstAt is when the first event was stored (process contenders), from the start.
	FirstAt time.Duration `json:",omitempty"`
	// CheckpointAt is when the relay's checkpoint covered every event, from the start.
	CheckpointAt time.Duration `json:",omitempty"`
	// CPU is the contender process's CPU seconds from start to done (0: in the harness).
	CPU float64 `json:",omitempty"`
	// ServerCPU is the CPU seconds of nats-server, kube-apiserver and etcd during the run,
	// and of the harness and the whole machine (busy time of every CPU).
	ServerCPU map[string]float64 `json:",omitempty"`
	PeakRSS   int64              `json:",omitempty"`
	// Bytes is what a bare list read from the apiserver (bare lists and machine limit).
	Bytes int64 `json:",omitempty"`
	// ListTook and PublishTook are the machine limit's two halves, run at the same time;
	// Took is the longer.
	ListTook    time.Duration `json:",omitempty"`
	PublishTook time.Duration `json:",omitempty"`
	Err         string        `json:",omitempty"`
}

// Rate is events per second.
func (r TimedRun) Rate() float64 {
	if r.Err != "" || r.Took <= 0 {
		return 0
	}
	return float64(r.Events) / r.Took.Seconds()
}

// Steady is the steady-state latency scenario at one write rate.
type Steady struct {
	Rate     int
	Duration time.Duration
	Runs     map[string][]LatencyRun
}

// LatencyRun is one contender's steady-state window.
type LatencyRun struct {
	Round    int
	Writes   int
	Achieved float64
	Received int
	Missing  int
	// E2E is from the write's response (ceiling: the publish call) to the consumer's
	// receipt (raw watch: the watch's receipt).
	E2E Percentiles
	// Added is from the raw watch's receipt of the same change to the consumer's receipt.
	Added Percentiles
	// Own is the relay's own latency from its metrics, receipt of a change to its ack
	// (pipeline_lag_seconds observed during the window; no maximum).
	Own Percentiles `json:",omitzero"`
	// Window is from the first write to the end of the drain: the interval CPU is measured over.
	Window time.Duration
	// CPU is the contender process's CPU seconds during the window.
	CPU       float64            `json:",omitempty"`
	ServerCPU map[string]float64 `json:",omitempty"`
	Err       string             `json:",omitempty"`
}

// Percentiles of a latency distribution; N is the sample count.
type Percentiles struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

func percentiles(samples []time.Duration) Percentiles {
	if len(samples) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		// Nearest rank: the smallest sample with at least q of the samples at or below it.
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Percentiles{N: len(s), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: s[len(s)-1]}
}

// Memory is the memory scenario.
type Memory struct {
	Runs []MemoryRun
}

// MemoryRun is one contender watching a number of objects.
type MemoryRun struct {
	Contender string
	Objects   int
	// SyncTook is the initial sync's time; SyncCPU its CPU seconds.
	SyncTook time.Duration
	SyncCPU  float64
	// RSS and PeakRSS are VmRSS and VmHWM after settling.
	RSS, PeakRSS int64
	// HeapLiveMB is the live heap of the last GC (GODEBUG=gctrace=1), in the runtime's MB
	// (2^20 bytes); HeapForced says that GC was forced (the runtime's 2-minute idle GC).
	HeapLiveMB int
	HeapForced bool
	// HeapAfterSync says the last GC ran after the sync was complete, so its live heap is
	// the idle one (not the sync's working set).
	HeapAfterSync bool `json:",omitempty"`
	GCs           int
	// HeapBytes is the in-process engine's heap growth (runtime.MemStats.HeapAlloc after a
	// full GC, minus the same before the engine started).
	HeapBytes int64  `json:",omitempty"`
	Err       string `json:",omitempty"`
}

// Profile lists the profiles written and the top of each.
type Profile struct {
	Files []ProfileFile
}

// ProfileFile is one pprof file and its top functions.
type ProfileFile struct {
	What, Path, Top string
}

// Micro is one Go micro-benchmark: medians over -count runs.
type Micro struct {
	Package, Name        string
	Runs                 int
	NsPerOp              float64
	BytesPerOp, AllocsOp float64
	Extra                map[string]float64 `json:",omitempty"`
}

// median returns the median of xs (mean of the middle two for even counts); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

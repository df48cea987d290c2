package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Markers delimit the parts of docs/benchmarks.md: each mode's results are replaced by a run
// of that mode, the analysis is written by people and kept as it is.
const (
	markAnalysisBegin = "<!-- bench:analysis:begin -->"
	markAnalysisEnd   = "<!-- bench:analysis:end -->"
)

func markResults(mode, edge string) string { return "<!-- bench:results:" + mode + ":" + edge + " -->" }

// Render rewrites the Markdown section of cfg.Mode from the saved JSON, without measuring:
// for a change of the report's layout.
func Render(cfg Config) error {
	jsonPath := filepath.Join(cfg.ArtifactDir, cfg.Mode+".json")
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var r Results
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(b, &r); err != nil && !errors.As(err, &typeErr) {
		return fmt.Errorf("read %s: %w", jsonPath, err)
	}
	r.Summary = Summarize(&r)
	return writeReport(cfg, &r, jsonPath)
}

// Save writes the run's JSON into the artifact directory and its section into the Markdown
// report, keeping the other mode's section and the analysis.
func Save(cfg Config, r *Results) error {
	if err := os.MkdirAll(cfg.ArtifactDir, 0o755); err != nil {
		return err
	}
	jsonPath := filepath.Join(cfg.ArtifactDir, cfg.Mode+".json")
	r = mergePrevious(cfg, r, jsonPath)
	r.Summary = Summarize(r)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return writeReport(cfg, r, jsonPath)
}

// writeReport replaces r's mode section of the Markdown report, keeping the rest.
func writeReport(cfg Config, r *Results, jsonPath string) error {
	relJSON, err := filepath.Rel(cfg.RepoRoot, jsonPath)
	if err != nil {
		relJSON = jsonPath
	}
	old, err := os.ReadFile(cfg.Out)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	sections := map[string]string{}
	for _, mode := range []string{ModeFull, ModeQuick} {
		sections[mode] = between(string(old), markResults(mode, "begin"), markResults(mode, "end"))
		if sections[mode] == "" {
			sections[mode] = fmt.Sprintf("No %s run recorded yet.\n", mode)
		}
	}
	if sections[r.Mode], err = renderResults(r, relJSON); err != nil {
		return err
	}
	analysis := between(string(old), markAnalysisBegin, markAnalysisEnd)
	if analysis == "" {
		analysis = "## Analysis\n\nNot written yet: read the tables, profile what misses a target, and write down here what limits it.\n"
	}

	var b strings.Builder
	b.WriteString(intro)
	for _, mode := range []string{ModeFull, ModeQuick} {
		fmt.Fprintf(&b, "%s\n%s%s\n\n", markResults(mode, "begin"), strings.TrimLeft(sections[mode], "\n"), markResults(mode, "end"))
	}
	fmt.Fprintf(&b, "%s\n%s%s\n", markAnalysisBegin, strings.TrimLeft(analysis, "\n"), markAnalysisEnd)
	tmp := cfg.Out + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, cfg.Out)
}

// mergePrevious returns r completed with the results of the scenarios this run did not run,
// taken from the previous run of the same mode (its JSON at path), with their provenance.
func mergePrevious(cfg Config, r *Results, path string) *Results {
	b, err := os.ReadFile(path)
	if err != nil {
		return r
	}
	var old Results
	// A field whose type changed since that run is skipped; the rest is still used.
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(b, &old); (err != nil && !errors.As(err, &typeErr)) || old.Mode != r.Mode {
		return r
	}
	merged := *r
	kept := map[string]bool{}
	take := func(scenario string, have bool, copyOld func()) {
		if cfg.runs(scenario) || have {
			return
		}
		copyOld()
		kept[scenario] = true
	}
	take(ScenarioSync, r.Sync != nil, func() { merged.Sync = old.Sync })
	take(ScenarioCatchup, r.Catchup != nil, func() { merged.Catchup = old.Catchup })
	take(ScenarioSteady, r.Steady != nil, func() { merged.Steady = old.Steady })
	take(ScenarioMemory, r.Memory != nil, func() { merged.Memory = old.Memory })
	take(ScenarioBudget, r.Budget != nil, func() { merged.Budget = old.Budget })
	take(ScenarioProfile, r.Profile != nil, func() { merged.Profile = old.Profile })
	take(ScenarioMicro, r.Micro != nil, func() { merged.Micro = old.Micro })
	if len(kept) == 0 {
		return r
	}
	scenarioOf := func(s string) string { name, _, _ := strings.Cut(s, ":"); return strings.Fields(name + " x")[0] }
	if len(old.Measured) == 0 { // from before provenance was recorded
		for _, sc := range AllScenarios {
			old.Measured = append(old.Measured, KV{sc, old.Started.Format("2006-01-02 15:04 UTC") + ", " + old.Command})
		}
	}
	merged.Measured = append(slices.Clone(r.Measured), keepKV(old.Measured, kept)...)
	merged.Load = append(slices.Clone(r.Load), keepKV(old.Load, kept)...)
	for _, st := range old.Setup {
		if !slices.ContainsFunc(merged.Setup, func(x SetupStep) bool { return x.What == st.What && x.N == st.N }) {
			merged.Setup = append(merged.Setup, st)
		}
	}
	for _, n := range old.Notes {
		if kept[scenarioOf(n)] {
			merged.Notes = append(merged.Notes, n)
		}
	}
	return &merged
}

func keepKV(kvs []KV, kept map[string]bool) []KV {
	var out []KV
	for _, kv := range kvs {
		if kept[kv.Name] {
			out = append(out, kv)
		}
	}
	return out
}

// between returns the text between the begin and end markers, "" when absent.
func between(s, begin, end string) string {
	_, rest, ok := strings.Cut(s, begin)
	if !ok {
		return ""
	}
	in, _, ok := strings.Cut(rest, end)
	if !ok {
		return ""
	}
	return in
}

// intro is the part of the report that does not depend on a run: what is measured and how.
const intro = `# Benchmarks

How much load kube-nats-relay carries and what it costs, measured side by side with what a user
could do instead and with what the machine allows, on a real kube-apiserver, etcd and
nats-server on loopback (the same binaries as the integration tests, ` + "`internal/testenv`" + `).
The tables below are written by ` + "`make bench`" + ` (` + "`hack/bench`, `internal/bench`" + `) from
what it measured; the analysis at the end is written by people. Nothing here is a pass/fail
test: the machine is shared and noisy, so read medians, ratios and the spread between rounds.

## How to reproduce

` + "```sh" + `
make bench                          # the issue's sizes: about an hour on 2 cores
make bench BENCH_FLAGS=-quick       # reduced sizes, a few minutes: checks that everything works
make bench BENCH_FLAGS='-scenarios catchup'   # re-measure some scenarios, keep the others
make bench BENCH_FLAGS='-scenarios budget'    # peak RSS against the memory budget alone (minutes)
go run ./hack/bench -help           # every size and option
` + "```" + `

A run starts its own etcd, kube-apiserver and nats-server (JetStream, file storage) in a
temporary directory, builds the relay binary from the working tree, and writes its section of
this file, ` + "`docs/benchmarks/<mode>.json`" + ` with every round's raw numbers, and (with the profile
scenario) pprof files under ` + "`docs/benchmarks/profiles/`" + `. A quick run replaces only the
quick section, a full run only the full one; a run of some scenarios keeps the other scenarios'
numbers from the previous run of its mode, and the section says when each was measured.

## Contenders

- **ceiling**: the relay's messages (same subjects, headers, ` + "`Nats-Msg-Id`" + ` ids, bodies, so
  the same sizes; built with the ` + "`event`" + ` package from the same objects) published straight from
  nats.go with ` + "`PublishMsgAsync`" + `, at most 256 unacknowledged (the relay's ` + "`RELAY_MAX_INFLIGHT`" + `),
  to a stream created as the relay creates it. No Kubernetes in the loop: what JetStream on this
  machine allows.
- **raw watch**: client-go reading the same changes and publishing nothing. Initial sync: a
  paginated list through the dynamic client (pages of 500, JSON into unstructured objects, as the
  relay reads); **raw-proto** is the same list through the typed client in protobuf, the cheapest
  way to read, to show what the JSON format costs. Catch-up: a dynamic watch from the
  resourceVersion before the changes. Steady state: a typed protobuf watch on a connection of its
  own, also the reference clock for the relay's added latency.
- **naive relay**: what a user writes in fifty lines (` + "`internal/bench/naive.go`" + `): a shared
  informer whose add, update and delete handlers strip managedFields, encode the object and call
  the synchronous ` + "`js.PublishMsg`" + `, with the same subjects, ids and headers. No checkpoint, no
  index, no back-pressure. It runs as its own process (a subcommand of the harness binary),
  measured like the relay.
- **relay**: the kube-nats-relay binary, as a process, with its defaults (` + "`RELAY_KUBE_QPS=50`" + `,
  ` + "`RELAY_BUFFER_SIZE=1024`" + `, ` + "`RELAY_MAX_INFLIGHT=256`" + `, ` + "`RELAY_CHECKPOINT_INTERVAL=1s`" + `, durable
  object index on), watching one namespace.

Within each round every contender runs once, one after the other, in an order that rotates from
round to round; each gets a fresh stream (and the relay fresh buckets) of its own, deleted after
it. Reported numbers are medians over rounds.

## Method

- **Initial sync**: the objects exist; a contender starts from nothing; time from its start (the
  process start, the first publish, the list call) until the stream holds every event, which is
  when JetStream has acknowledged each one (polled every 20 ms). For the relay the table also
  gives when its checkpoint was first written: that happens only once every event *and* every
  object-index record is acknowledged.
- **Catch-up**: the relay synced every object and was stopped with SIGTERM; then the changes are
  written (32 writers); each contender is timed from its start until every change is
  acknowledged (raw watch: read). It runs twice: against the default apiserver, whose watch cache
  serves the history, and against a second control plane whose apiserver has no watch cache for
  configmaps (` + "`--watch-cache-sizes=configmaps#0`" + `), so that the history comes from etcd. A relay
  run that had to relist (410 Gone) is reported with its time and marked; a raw watch that gets
  410 has no number.
- **Steady state**: each contender in turn watches a namespace of objects that the harness updates
  round-robin at a fixed rate for a fixed time (unconditional protobuf updates, the cheapest
  write for the apiserver, from 32 writers; when the cluster cannot keep up, a write waits for a
  free writer and the achieved rate, which the table reports, falls short of the intended one).
  For every change the harness records when the write's response arrived, when its own raw watch saw the change, and when an ordered JetStream
  consumer (` + "`DeliverNew`" + `, its own connection) received the event; all three clocks are the
  harness process's monotonic clock. *End-to-end* is consumer receipt minus write response.
  *Added* is consumer receipt minus the raw watch's receipt of the same change: both watches
  are served by the same apiserver at the same moment, so the difference is the relay's intake,
  publish and ack, plus JetStream delivering to the consumer (which the ceiling row measures on
  its own: publish call to consumer receipt), plus whatever delays one watch and not the other
  on a loaded machine; it is an upper bound of the relay's own latency. *Own* is that latency
  as the relay measures it: its ` + "`kube_nats_relay_pipeline_lag_seconds`" + ` histogram (from the
  moment the intake has a change, just after the watch event is read, to its JetStream ack),
  scraped from ` + "`/metrics`" + ` before and after the window, the percentiles interpolated inside
  buckets as Prometheus' ` + "`histogram_quantile`" + ` does (bounds 3, 4, 5 and 7.5 ms around the
  target). A change the consumer has not received 15 s after the last write is counted as
  missing.
- **Memory**: the relay and the naive relay sync N objects, idle (the settle time), then VmRSS
  and VmHWM are read from ` + "`/proc/<pid>/status`" + ` and the Go heap from the last line of
  ` + "`GODEBUG=gctrace=1`" + ` (the live heap after marking, in whole MB; the table says whether
  that GC ran after the sync, when the heap holds only what the process keeps, or during it; the
  runtime forces a GC after 2 idle minutes, hence the default settle of 130 s). Because gctrace rounds to MB,
  the exact figure comes from running the relay's engine inside the harness (wired as
  ` + "`cmd/relay`" + ` wires it: ` + "`relay.Source`" + `, the checkpoint store and the object index): HeapAlloc
  after two full GCs, minus the same before it started. Bytes per object are the growth between
  the smallest and the largest size, so fixed costs cancel.
- **Memory budget**: the relay binary, run as the Helm chart runs it (` + "`GOMEMLIMIT`" + ` at 90%
  of the chart's default 256Mi limit, the memory budget derived from it), relays one namespace
  from scratch: an empty one (its peak RSS is the base), 120 Secrets of about 870 KB (like Helm
  release Secrets; values redacted as by default, then published), and the small ConfigMaps of
  the memory scenario (100,000 in a full run). Peak RSS is VmHWM once every event is
  acknowledged and the checkpoint written; the target is under the chart's limit and at most
  1.5 × (budget + base).
- **CPU**: user plus system seconds of the contender process from ` + "`/proc/<pid>/stat`" + `, per
  10,000 events; over the same interval, the servers' CPU (nats-server; kube-apiserver plus
  etcd), the harness's own (load generator, consumer, raw watch, ceiling) and the load of other
  work sharing the machine: its busy time from ` + "`/proc/stat`" + ` minus all of ours, in cores.
- **Profiles**: the binary has no pprof endpoint, so the engine in-process is profiled
  (` + "`runtime/pprof`" + `; its goroutines carry the label ` + "`part=relay`" + `, and the tops below are
  restricted to them with ` + "`-tagfocus`" + `). Open a file with ` + "`go tool pprof -http=: <file>`" + `.

`

// Formatting.

func fmtCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func joinCounts(ns []int) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmtCount(n)
	}
	return strings.Join(out, " and ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtOptDur(d time.Duration) string { return fmtDur(d) }

func fmtOpt(v float64, format string) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func fmtBytes(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func fmtOptBytes(b float64) string {
	if b == 0 {
		return "–"
	}
	return fmtBytes(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

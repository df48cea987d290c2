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
	// The overview at the top is written from the run (see overviewOf) at every save.
	markOverviewBegin = "<!-- bench:overview:begin -->"
	markOverviewEnd   = "<!-- bench:overview:end -->"
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

	if err := os.MkdirAll(cfg.ArtifactDir, 0o755); err != nil {
		return err
	}
	if _, _, err := writePlots(cfg, r); err != nil {
		return fmt.Errorf("write the plots: %w", err)
	}
	var b strings.Builder
	if err := sectionTemplate.ExecuteTemplate(&b, "title", nil); err != nil {
		return fmt.Errorf("render the report's title: %w", err)
	}
	b.WriteString(markOverviewBegin + "\n")
	if err := sectionTemplate.ExecuteTemplate(&b, "overview", overviewOf(cfg, r)); err != nil {
		return fmt.Errorf("render the overview: %w", err)
	}
	b.WriteString(markOverviewEnd + "\n\n")
	if err := sectionTemplate.ExecuteTemplate(&b, "intro", nil); err != nil {
		return fmt.Errorf("render the report's introduction: %w", err)
	}
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
	take(ScenarioSweep, r.Sweep != nil, func() { merged.Sweep = old.Sweep })
	take(ScenarioMemory, r.Memory != nil, func() { merged.Memory = old.Memory })
	take(ScenarioBudget, r.Budget != nil, func() { merged.Budget = old.Budget })
	take(ScenarioProfile, r.Profile != nil, func() { merged.Profile = old.Profile })
	take(ScenarioMicro, r.Micro != nil, func() { merged.Micro = old.Micro })
	take(ScenarioPods, r.Pods != nil, func() { merged.Pods = old.Pods })
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

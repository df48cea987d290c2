package bench

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"
	"time"
)

// reportTemplate is the Markdown of the report: its introduction (what is measured and how)
// and one run's section, every table written from Results and its Summary.
//
//go:embed report.md.tmpl
var reportTemplate string

// sectionTemplate parses reportTemplate once; its functions only format numbers.
var sectionTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"count":        fmtCount,
	"counts":       joinCounts,
	"dur":          fmtDur,
	"ms":           ms,
	"opt":          fmtOpt,
	"optBytes":     func(v any) string { return fmtOptBytes(num(v)) },
	"mib":          func(v any) string { return fmtBytes(num(v)) },
	"size":         fmtSize,
	"per10k":       func(cpu float64, n int) float64 { return cpu / float64(n) * 10000 },
	"verdict":      verdict,
	"historyTitle": historyTitle,
	"trimPrefix":   strings.TrimPrefix,
	"flat":         func(s string) string { return strings.ReplaceAll(s, "\n", " ") },
	"kvs":          joinKVs,
	"extra":        fmtExtra,
	"args":         func(xs ...any) []any { return xs },
	"value":        fmtValue,
	// jsonPath is bound per rendering, see renderResults.
	"jsonPath": func() string { return "" },
}).Parse(reportTemplate))

// renderResults writes the Markdown section of one run: machine, targets, one table per
// scenario, profiles, micro-benchmarks and notes. r.Summary is computed when r has none.
func renderResults(r *Results, jsonPath string) (string, error) {
	if r.Summary == nil {
		r.Summary = Summarize(r)
	}
	t, err := sectionTemplate.Clone()
	if err != nil {
		return "", err
	}
	t.Funcs(template.FuncMap{"jsonPath": func() string { return jsonPath }})
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "section", r); err != nil {
		return "", fmt.Errorf("render the %s report: %w", r.Mode, err)
	}
	return b.String(), nil
}

// num converts the integer and float fields the template formats as bytes.
func num(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	panic(fmt.Sprintf("bench report: %T is not a number", v))
}

// fmtValue writes a Comparison's value in its unit.
func fmtValue(unit string, v float64) string {
	switch unit {
	case unitRate:
		return fmt.Sprintf("%.0f/s", v)
	case unitLatency:
		return ms(time.Duration(v))
	case unitTime:
		return fmtDur(time.Duration(v))
	case unitBytes:
		return fmtBytes(v)
	case unitCPU:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// joinKVs writes an ordered list as name, sep, value, joined by between.
func joinKVs(kvs []KV, sep, between string) string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Name + sep + kv.Value
	}
	return strings.Join(out, between)
}

// fmtExtra writes a micro-benchmark's own metrics, by unit.
func fmtExtra(extra map[string]float64) string {
	var out []string
	for _, k := range sortedKeys(extra) {
		out = append(out, fmt.Sprintf("%.4g %s", extra[k], k))
	}
	return strings.Join(out, ", ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

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

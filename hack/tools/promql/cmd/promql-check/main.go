// Command promql-check parses PromQL expressions with the Prometheus parser at the pinned
// version and lists the metric names each one selects and the label names it matches or
// groups by. The chart tests use it to keep the chart's alerts and Grafana dashboard honest:
// every expression parses, and every metric and label it reads exists in a running relay's
// /metrics.
//
// Input (stdin): a JSON array of expressions. Output (stdout): a JSON array with, for each
// expression in order, {"expr": ..., "metrics": [...], "labels": [...], "error": "..."}. It
// exits 1 only when the input is not a JSON array of strings.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// result is what promql-check reports for one expression.
type result struct {
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
	Labels  []string `json:"labels"`
	Error   string   `json:"error,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: read a JSON array of expressions from stdin: %v\n", err)
		os.Exit(1)
	}
	p := parser.NewParser(parser.Options{})
	out := make([]result, 0, len(exprs))
	for _, e := range exprs {
		out = append(out, check(p, e))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: %v\n", err)
		os.Exit(1)
	}
}

// check parses one expression and collects the metric names of its vector selectors and the
// label names of their matchers and of its aggregations' and joins' groupings.
func check(p parser.Parser, expr string) result {
	r := result{Expr: expr, Metrics: []string{}, Labels: []string{}}
	label := func(names ...string) {
		for _, n := range names {
			if n != labels.MetricName && !slices.Contains(r.Labels, n) {
				r.Labels = append(r.Labels, n)
			}
		}
	}
	node, err := p.ParseExpr(expr)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.AggregateExpr:
			label(n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				label(n.VectorMatching.MatchingLabels...)
				label(n.VectorMatching.Include...)
			}
		}
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			label(m.Name)
		}
		name := vs.Name
		if name == "" { // {__name__="..."}
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			r.Error = fmt.Sprintf("selector %s names no metric", vs)
		} else if !slices.Contains(r.Metrics, name) {
			r.Metrics = append(r.Metrics, name)
		}
		return nil
	})
	return r
}

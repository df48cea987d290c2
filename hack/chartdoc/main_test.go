package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartReadmeIsUpToDate fails when values.yaml or Chart.yaml changed without the README.
func TestChartReadmeIsUpToDate(t *testing.T) {
	dir := filepath.Join("..", "..", chartDir)
	chart, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(chart, values)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s/README.md is out of date with values.yaml and Chart.yaml: run `%s` (or `make chart-docs`) from the repository root", chartDir, Command)
	}
}

// TestEveryChartValueIsDocumented fails when a value of the chart has no `# -- ` comment:
// its README row would have no description.
func TestEveryChartValueIsDocumented(t *testing.T) {
	values, err := os.ReadFile(filepath.Join("..", "..", chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Values(values)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("values.yaml: no values read")
	}
	for _, v := range rows {
		if v.Description == "" {
			t.Errorf("%s/values.yaml: %s has no `# -- ` comment", chartDir, v.Key)
		}
	}
}

func TestValuesReadsTheDocComments(t *testing.T) {
	const values = `# File header, about nothing in particular.

# -- Pods.
replicaCount: 1

# A section comment, not a value's.
image:
  # -- The repository,
  # over two lines | with a pipe.
  repository: relay
  pullPolicy: IfNotPresent

# -- A documented mapping is one row.
resources:
  limits:
    memory: 256Mi

# -- A stale doc comment, cut off by a blank line.

undocumented: []
ratio: 0.5
on: true
empty: {}
`
	got, err := Values([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{
		{Key: "replicaCount", Type: "int", Default: "1", Description: "Pods."},
		{Key: "image.repository", Type: "string", Default: `"relay"`, Description: "The repository, over two lines | with a pipe."},
		{Key: "image.pullPolicy", Type: "string", Default: `"IfNotPresent"`},
		{Key: "resources", Type: "map", Default: `{"limits":{"memory":"256Mi"}}`, Description: "A documented mapping is one row."},
		{Key: "undocumented", Type: "list", Default: "[]"},
		{Key: "ratio", Type: "float", Default: "0.5"},
		{Key: "on", Type: "bool", Default: "true"},
		{Key: "empty", Type: "map", Default: "{}"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d values %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	readme, err := Generate([]byte("name: c\n"), []byte(values))
	if err != nil {
		t.Fatal(err)
	}
	if row := "| `image.repository` | string | `\"relay\"` | The repository, over two lines \\| with a pipe. |\n"; !strings.Contains(string(readme), row) {
		t.Errorf("README lacks the row %q:\n%s", row, readme)
	}
}

// Command chartdoc writes the Helm chart's README (charts/kube-nats-relay/README.md) from
// its Chart.yaml and the `# -- ` comments of its values.yaml, so that the table of values
// never drifts from the values themselves. Run it from the repository root after changing
// either file:
//
//	go run ./hack/chartdoc
//
// (or `make chart-docs`). With -check it writes nothing and exits 1 when the README is out of
// date. A value is documented by a comment block directly above its key whose first line
// starts with `# -- `; the lines after it continue the description. A key documented so is
// one row, its whole value the default; an undocumented mapping is described key by key; an
// undocumented scalar or list still gets a row, with no description.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// chartDir is the chart, relative to the repository root.
const chartDir = "charts/kube-nats-relay"

// Command is how to regenerate the README; the README and the check's failure say it.
const Command = "go run ./hack/chartdoc"

func main() {
	check := flag.Bool("check", false, "exit 1 if the README is out of date instead of writing it")
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintf(os.Stderr, "chartdoc: %v\n", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	dir := filepath.Join(root, chartDir)
	chart, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return err
	}
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	readme, err := Generate(chart, values)
	if err != nil {
		return err
	}
	rows, err := Values(values)
	if err != nil {
		return err
	}
	for _, v := range rows {
		if v.Description == "" {
			fmt.Fprintf(os.Stderr, "chartdoc: %s has no `# -- ` comment\n", v.Key)
		}
	}
	path := filepath.Join(dir, "README.md")
	if check {
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if !bytes.Equal(old, readme) {
			return fmt.Errorf("%s is out of date: run `%s`", path, Command)
		}
		return nil
	}
	return os.WriteFile(path, readme, 0o644)
}

// Value is one row of the values table.
type Value struct {
	// Key is the dotted path, e.g. nats.auth.userKey.
	Key string
	// Type is the YAML type of the default: string, int, float, bool, list, map or null.
	Type string
	// Default is the default as compact JSON.
	Default string
	// Description is the `# -- ` comment, lines joined; empty when undocumented.
	Description string
}

// Values returns the rows of values.yaml, in file order.
func Values(valuesYAML []byte) ([]Value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return nil, fmt.Errorf("parse values.yaml: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("values.yaml is not a mapping")
	}
	var out []Value
	if err := walk(root, "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

func walk(m *yaml.Node, prefix string, out *[]Value) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		desc, documented := description(k.HeadComment)
		if !documented && v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			if err := walk(v, key+".", out); err != nil {
				return err
			}
			continue
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
		def, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		*out = append(*out, Value{Key: key, Type: typeOf(v), Default: string(def), Description: desc})
	}
	return nil
}

// description returns the `# -- ` block of a head comment (the last one, if several) and
// whether there is one.
func description(comment string) (string, bool) {
	var lines []string
	found := false
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "# -- "):
			lines, found = []string{strings.TrimPrefix(line, "# -- ")}, true
		case found && strings.HasPrefix(line, "#"):
			lines = append(lines, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case found && line == "":
			// A blank line ends the block: what follows is not about this key.
			lines, found = nil, false
		}
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " "), found
}

func typeOf(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "map"
	case yaml.SequenceNode:
		return "list"
	}
	switch v.ShortTag() {
	case "!!int":
		return "int"
	case "!!float":
		return "float"
	case "!!bool":
		return "bool"
	case "!!null":
		return "null"
	}
	return "string"
}

// chartMeta is what the README shows of Chart.yaml.
type chartMeta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	KubeVersion string `yaml:"kubeVersion"`
	Home        string `yaml:"home"`
}

// Generate returns the README for a Chart.yaml and values.yaml.
func Generate(chartYAML, valuesYAML []byte) ([]byte, error) {
	var c chartMeta
	if err := yaml.Unmarshal(chartYAML, &c); err != nil {
		return nil, fmt.Errorf("parse Chart.yaml: %w", err)
	}
	values, err := Values(valuesYAML)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Generated by `%s` from Chart.yaml and the `# -- ` comments of values.yaml: edit those and run it again. -->\n\n", Command)
	fmt.Fprintf(&b, "# %s\n\n", c.Name)
	fmt.Fprintf(&b, "%s\n\n", strings.Join(strings.Fields(c.Description), " "))
	fmt.Fprintf(&b, "Chart version %s, relay version %s, Kubernetes %s. Project: %s\n\n", c.Version, c.AppVersion, c.KubeVersion, c.Home)
	b.WriteString("```sh\nhelm install relay charts/kube-nats-relay --namespace kube-relay --create-namespace \\\n" +
		"  --set 'relay.resources={deployments.apps,configmaps}' --set 'nats.urls={nats://nats.nats:4222}'\n" +
		"helm test relay --namespace kube-relay   # /readyz, then an event in the stream\n```\n\n")
	b.WriteString("The relay's own documentation (configuration, operations, events) is in the repository's\n`docs/`; the values below set its environment variables.\n\n")
	b.WriteString("## Values\n\n| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n")
	for _, v := range values {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", v.Key, v.Type, cell(v.Default), cell(v.Description))
	}
	return b.Bytes(), nil
}

// cell escapes what would end a table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

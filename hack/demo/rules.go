package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// libraryFile is the shipped library of derived events (docs/configuration.md, "A library of
// derived events"), relative to the module root, where `make demo` runs.
const libraryFile = "examples/rules/derived.yaml"

// writeRules writes into dir a rules file holding the library's rules for the demo's
// resources, unchanged, and returns its path and the resources it has rules for.
func writeRules(dir string) (string, []string, error) {
	data, err := os.ReadFile(libraryFile)
	if err != nil {
		return "", nil, fmt.Errorf("the library of derived events: %w (run the demo from the module root)", err)
	}
	var lib struct {
		Resources []map[string]any `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &lib); err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", libraryFile, err)
	}
	demo := strings.Split(resources, ",")
	var keep []map[string]any
	var names []string
	for _, r := range lib.Resources {
		name, _ := r["resource"].(string)
		if slices.Contains(demo, name) {
			keep = append(keep, r)
			names = append(names, name)
		}
	}
	out, err := yaml.Marshal(map[string]any{"resources": keep})
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return "", nil, err
	}
	return path, names, nil
}

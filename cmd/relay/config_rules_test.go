package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeRules writes a rules file and returns its path.
func writeRules(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigRulesFileProblemsNameFileRuleAndField(t *testing.T) {
	path := writeRules(t, `
resources:
  - resource: pods
    when: 'object.status.phase =='
    events: [added, updated]
  - resource: Secrets
`)
	setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "configmaps", "RELAY_RULES_FILE": path})
	problems, msg := configProblems(t)
	wants := []string{"resources[0] (pods): when: 1:", "resources[0] (pods): events", "resources[1] (Secrets): resource"}
	for _, want := range wants {
		found := false
		for _, p := range problems {
			if p.Var == "RELAY_RULES_FILE" && p.Value == path && strings.Contains(p.Reason, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem of RELAY_RULES_FILE=%q containing %q in:\n%s", path, want, msg)
		}
	}
}

func TestConfigRulesFileOnlyResourcesAndPrecedence(t *testing.T) {
	path := writeRules(t, `
defaults:
  labelSelector: "tier=web"
resources:
  - resource: pods
    namespaces: [team-a]
  - resource: configmaps
    labelSelector: "app=x"
`)
	// The variables are the base: the file's defaults override them, its rules override both.
	setConfigEnv(t, map[string]string{
		"RELAY_RULES_FILE": path, "RELAY_LABEL_SELECTOR": "env=prod", "RELAY_FIELD_SELECTOR": "metadata.name!=x",
		"RELAY_NAMESPACES": "team-b", "RELAY_EVENT_TYPES": "added,deleted",
	})
	cfg, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	var names []string
	for _, s := range cfg.Resources() {
		names = append(names, s.Raw)
	}
	if want := []string{"pods", "configmaps"}; !slices.Equal(names, want) {
		t.Fatalf("got resources %q, want %q (from the rules file alone)", names, want)
	}
	pods, cms := cfg.Rule(cfg.Resources()[0]), cfg.Rule(cfg.Resources()[1])
	for _, tt := range []struct {
		name, got, want string
	}{
		{"pods label selector (file defaults over variable)", deref(pods.LabelSelector), "tier=web"},
		{"configmaps label selector (rule over defaults)", deref(cms.LabelSelector), "app=x"},
		{"field selector (variable)", deref(pods.FieldSelector), "metadata.name!=x"},
		{"pods namespaces (rule)", strings.Join(pods.Namespaces, ","), "team-a"},
		{"configmaps namespaces (variable)", strings.Join(cms.Namespaces, ","), "team-b"},
		{"event types (variable)", strings.Join(cms.Events, ","), "added,deleted"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestConfigRulesFileConflictingWithVariables(t *testing.T) {
	path := writeRules(t, `
resources:
  - resource: pods
    excludeNamespaces: [team-a]
`)
	setConfigEnv(t, map[string]string{"RELAY_RULES_FILE": path, "RELAY_NAMESPACES": "team-a"})
	problems, msg := configProblems(t)
	if len(problems) != 1 || problems[0].Var != "RELAY_RULES_FILE" || !strings.Contains(problems[0].Reason, "pods: excludeNamespaces[0]") {
		t.Fatalf("got %s, want one problem of RELAY_RULES_FILE naming pods and excludeNamespaces[0]", msg)
	}
}

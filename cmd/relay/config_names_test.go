package main

import (
	"strings"
	"testing"
)

func TestConfigNamesTheStreamAndBucketsAfterTheCluster(t *testing.T) {
	tests := []struct {
		name                               string
		env                                map[string]string
		stream, checkpoints, index, mirror string
		allDerived                         bool
	}{
		{"unset names include the cluster", map[string]string{"RELAY_CLUSTER": "prod"},
			"KUBE_prod", "kube-relay-checkpoints-prod", "kube-relay-index-prod", "kube-relay-mirror-prod", true},
		{"empty names are unset", map[string]string{"RELAY_CLUSTER": "prod", "RELAY_STREAM": ""},
			"KUBE_prod", "kube-relay-checkpoints-prod", "kube-relay-index-prod", "kube-relay-mirror-prod", true},
		{"a set name is kept and the others derived", map[string]string{"RELAY_CLUSTER": "prod", "RELAY_STREAM": "KUBE"},
			"KUBE", "kube-relay-checkpoints-prod", "kube-relay-index-prod", "kube-relay-mirror-prod", false},
		{"set names are kept", map[string]string{"RELAY_CLUSTER": "prod", "RELAY_STREAM": "S", "RELAY_CHECKPOINT_BUCKET": "c",
			"RELAY_INDEX_BUCKET": "i", "RELAY_MIRROR_BUCKET": "m"}, "S", "c", "i", "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"RELAY_RESOURCES": "pods"}
			for k, v := range tt.env {
				env[k] = v
			}
			setConfigEnv(t, env)
			cfg, err := loadConfig()
			if err != nil {
				t.Fatalf("loadConfig: %v", err)
			}
			got := []string{cfg.Stream, cfg.CheckpointBucket, cfg.IndexBucket, cfg.MirrorBucket}
			want := []string{tt.stream, tt.checkpoints, tt.index, tt.mirror}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("got %v, want %v", got, want)
			}
			if cfg.derivedNames.all() != tt.allDerived {
				t.Errorf("every name derived: got %t, want %t", cfg.derivedNames.all(), tt.allDerived)
			}
		})
	}
}

func TestConfigValidatesTheNamesItWillUse(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // the one problem reported
	}{
		{"an index bucket set to the derived checkpoint bucket", map[string]string{"RELAY_CLUSTER": "prod", "RELAY_INDEX_BUCKET": "kube-relay-checkpoints-prod"},
			`RELAY_INDEX_BUCKET="kube-relay-checkpoints-prod": must differ from RELAY_CHECKPOINT_BUCKET`},
		{"a bad cluster is reported once, not in the names derived from it", map[string]string{"RELAY_CLUSTER": "Prod East", "RELAY_MIRROR_RESOURCES": "pods"},
			`RELAY_CLUSTER="Prod East"`},
		{"a set name is checked whatever the cluster", map[string]string{"RELAY_CLUSTER": "Prod", "RELAY_STREAM": "A.B"},
			`RELAY_STREAM="A.B"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"RELAY_RESOURCES": "pods"}
			for k, v := range tt.env {
				env[k] = v
			}
			setConfigEnv(t, env)
			problems, msg := configProblems(t)
			if !strings.Contains(msg, tt.want) {
				t.Errorf("got %s, want %s", msg, tt.want)
			}
			for _, p := range problems {
				if p.Var != "RELAY_CLUSTER" && !strings.Contains(tt.want, p.Var) {
					t.Errorf("got problem %s=%q: %s, want only %s", p.Var, p.Value, p.Reason, tt.want)
				}
			}
		})
	}
}

package main

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-nats-relay/kube-nats-relay/internal/leader"
)

func TestConfigLeaderElectionDefaults(t *testing.T) {
	setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods"})
	cfg, err := loadConfig()
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if cfg.LeaderElect.Bool {
		t.Error("leader election: got on, want off by default")
	}
	if cfg.LeaderElectionLease != "kube-nats-relay" {
		t.Errorf("lease: got %q, want kube-nats-relay", cfg.LeaderElectionLease)
	}
	if got := newTestElector(t, cfg).Lease(); strings.HasPrefix(got, "/") {
		t.Errorf("lease: got %q, want the pod's namespace or default", got)
	}
	for _, d := range []struct {
		name      string
		got, want time.Duration
	}{
		{"lease duration", cfg.LeaseDuration.Duration, 15 * time.Second},
		{"renew deadline", cfg.RenewDeadline.Duration, 10 * time.Second},
		{"retry period", cfg.RetryPeriod.Duration, 2 * time.Second},
	} {
		if d.got != d.want {
			t.Errorf("%s: got %s, want %s", d.name, d.got, d.want)
		}
	}
	a, b := newTestElector(t, cfg).Identity(), newTestElector(t, cfg).Identity()
	if a == b {
		t.Errorf("identities: got %q twice, want a random suffix per process", a)
	}
	cfg.Identity = "relay-0"
	if got := newTestElector(t, cfg).Identity(); got != "relay-0" {
		t.Errorf("identity: got %q, want RELAY_IDENTITY as given", got)
	}
	cfg.LeaderElectionNamespace = "ops"
	if got := newTestElector(t, cfg).Lease(); got != "ops/kube-nats-relay" {
		t.Errorf("lease: got %q, want ops/kube-nats-relay", got)
	}
}

// newTestElector returns the elector cfg configures, on a fake Lease client.
func newTestElector(t *testing.T, cfg Config) *leader.Elector {
	t.Helper()
	e, err := leader.New(cfg.leaderConfig(), leader.Deps{Leases: fake.NewClientset().CoordinationV1()})
	if err != nil {
		t.Fatalf("leader.New: %v", err)
	}
	return e
}

func TestConfigLeaderElectionInvalid(t *testing.T) {
	base := map[string]string{"RELAY_RESOURCES": "pods", "NATS_URL": "nats://a:4222", "RELAY_LEADER_ELECT": "true"}
	tests := []struct {
		name      string
		env       map[string]string
		wantVar   string
		wantValue string
		reason    string
	}{
		{"not a bool", map[string]string{"RELAY_LEADER_ELECT": "yes please"}, "RELAY_LEADER_ELECT", "yes please", "boolean"},
		{"embedded nats", map[string]string{"NATS_URL": ""}, "RELAY_LEADER_ELECT", "true", "NATS_URL"},
		{"bad namespace", map[string]string{"RELAY_LEADER_ELECTION_NAMESPACE": "Ops_1"}, "RELAY_LEADER_ELECTION_NAMESPACE", "Ops_1", "namespace"},
		{"bad lease name", map[string]string{"RELAY_LEADER_ELECTION_LEASE": "Relay Lease"}, "RELAY_LEADER_ELECTION_LEASE", "Relay Lease", "Lease name"},
		{"empty lease name", map[string]string{"RELAY_LEADER_ELECTION_LEASE": ""}, "RELAY_LEADER_ELECTION_LEASE", "", "Lease name"},
		{"identity with blanks", map[string]string{"RELAY_IDENTITY": " relay "}, "RELAY_IDENTITY", " relay ", "blanks"},
		{"lease duration not a duration", map[string]string{"RELAY_LEASE_DURATION": "15"}, "RELAY_LEASE_DURATION", "15", "duration"},
		{"lease duration too short", map[string]string{"RELAY_LEASE_DURATION": "500ms"}, "RELAY_LEASE_DURATION", "500ms", "between 1s and 5m"},
		{"zero retry period", map[string]string{"RELAY_RETRY_PERIOD": "0s"}, "RELAY_RETRY_PERIOD", "0s", "between 100ms and 5m"},
		{"renew deadline not above lease duration", map[string]string{"RELAY_RENEW_DEADLINE": "15s"}, "RELAY_RENEW_DEADLINE", "15s", "less than RELAY_LEASE_DURATION"},
		{"renew deadline plus retry period reach lease duration", map[string]string{"RELAY_RENEW_DEADLINE": "13s"}, "RELAY_RENEW_DEADLINE", "13s", "must be less than RELAY_LEASE_DURATION"},
		{"renew deadline within one jittered retry", map[string]string{"RELAY_RENEW_DEADLINE": "2s"}, "RELAY_RENEW_DEADLINE", "2s", "1.2 x RELAY_RETRY_PERIOD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			setConfigEnv(t, env)
			problems, msg := configProblems(t)
			found := false
			for _, p := range problems {
				if p.Var == tt.wantVar && p.Value == tt.wantValue && strings.Contains(p.Reason, tt.reason) {
					found = true
				}
			}
			if !found {
				t.Errorf("got problems:\n%s\nwant %s=%q mentioning %q", msg, tt.wantVar, tt.wantValue, tt.reason)
			}
		})
	}
}

func TestConfigLeaderElectionReportsEveryProblemAtOnce(t *testing.T) {
	setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "RELAY_LEADER_ELECT": "true",
		"RELAY_LEADER_ELECTION_LEASE": "A", "RELAY_RETRY_PERIOD": "soon"})
	problems, msg := configProblems(t)
	want := []string{"RELAY_LEADER_ELECT", "RELAY_LEADER_ELECTION_LEASE", "RELAY_RETRY_PERIOD"}
	for _, v := range want {
		found := false
		for _, p := range problems {
			found = found || p.Var == v
		}
		if !found {
			t.Errorf("no problem for %s in:\n%s", v, msg)
		}
	}
}

func TestConfigLeaderElectionTimingProblemsQuoteTheValuesAsGiven(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"renew deadline within one jittered retry",
			map[string]string{"RELAY_LEASE_DURATION": "5m", "RELAY_RENEW_DEADLINE": "1m", "RELAY_RETRY_PERIOD": "1m"},
			"must exceed 1.2 x RELAY_RETRY_PERIOD (1m): a renewal needs at least one retry"},
		{"renew deadline plus retry period reach lease duration",
			map[string]string{"RELAY_LEASE_DURATION": "1m", "RELAY_RENEW_DEADLINE": "1m", "RELAY_RETRY_PERIOD": "10s"},
			"RELAY_RENEW_DEADLINE + RELAY_RETRY_PERIOD (1m10s) must be less than RELAY_LEASE_DURATION (1m): a leader that cannot renew must stop before another may take the lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"RELAY_RESOURCES": "pods", "NATS_URL": "nats://a:4222", "RELAY_LEADER_ELECT": "true"}
			for k, v := range tt.env {
				env[k] = v
			}
			setConfigEnv(t, env)
			problems, msg := configProblems(t)
			found := false
			for _, p := range problems {
				found = found || p.Var == "RELAY_RENEW_DEADLINE" && p.Value == "1m" && p.Reason == tt.want
			}
			if !found {
				t.Errorf("got problems:\n%s\nwant RELAY_RENEW_DEADLINE=\"1m\": %s", msg, tt.want)
			}
		})
	}
}

// TestConfigLeaderElectionRetryRuleHoldsWithoutAValidLeaseDuration: the rule between
// RELAY_RENEW_DEADLINE and RELAY_RETRY_PERIOD is reported even when RELAY_LEASE_DURATION is
// itself invalid, and nothing is said against the invalid lease duration but its own problem.
func TestConfigLeaderElectionRetryRuleHoldsWithoutAValidLeaseDuration(t *testing.T) {
	for _, lease := range []string{"500ms", "-1s", "soon"} {
		t.Run(lease, func(t *testing.T) {
			setConfigEnv(t, map[string]string{"RELAY_RESOURCES": "pods", "NATS_URL": "nats://a:4222", "RELAY_LEADER_ELECT": "true",
				"RELAY_LEASE_DURATION": lease, "RELAY_RENEW_DEADLINE": "2s", "RELAY_RETRY_PERIOD": "2s"})
			problems, msg := configProblems(t)
			var got []string
			for _, p := range problems {
				got = append(got, p.Var)
				if strings.Contains(p.Reason, "less than RELAY_LEASE_DURATION") {
					t.Errorf("timing rule checked against an invalid lease duration:\n%s", msg)
				}
			}
			if want := "RELAY_LEASE_DURATION,RELAY_RENEW_DEADLINE"; strings.Join(got, ",") != want || !strings.Contains(msg, "1.2 x RELAY_RETRY_PERIOD (2s)") {
				t.Errorf("got problems:\n%s\nwant %s, the second saying 1.2 x RELAY_RETRY_PERIOD (2s)", msg, want)
			}
		})
	}
}

package charts_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestTemplateLeaderElectionIsOnForOneReplica renders one replica with the defaults: leader
// election on and pods rolled one by one, so that scaling up later changes neither (an
// unelected relay never runs beside elected ones).
func TestTemplateLeaderElectionIsOnForOneReplica(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
	}{
		{"defaults", nil},
		{"auto, as the chart's earlier default read", []string{"leaderElection.enabled=auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, releaseNS, nil, tc.sets)
			d := r.deployment(t)
			if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
				t.Errorf("strategy %s, want RollingUpdate", d.Spec.Strategy.Type)
			}
			checkEnv(t, d, map[string]string{"RELAY_LEADER_ELECT": "true", "RELAY_LEADER_ELECTION_LEASE": fullname})
			checkRBAC(t, r, rbacWant{cluster: listWatch("apps/deployments")})
		})
	}
}

// TestTemplateWithoutLeaderElectionPodsAreRecreated renders the two ways leader election is
// off (asked for, and the embedded nats-server, which is each replica's own): one replica,
// rolled by Recreate, without the Lease's Role.
func TestTemplateWithoutLeaderElectionPodsAreRecreated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
	}{
		{"enabled false", nil, []string{"leaderElection.enabled=false"}},
		{"embedded nats-server", []string{"embedded.yaml"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, releaseNS, tc.files, tc.sets)
			d := r.deployment(t)
			if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
				t.Errorf("strategy %+v, want Recreate (never two relays without leader election)", d.Spec.Strategy)
			}
			checkEnv(t, d, map[string]string{"RELAY_LEADER_ELECT": "false", "RELAY_LEADER_ELECTION_LEASE": ""})
			checkRBAC(t, r, rbacWant{cluster: listWatch("apps/deployments"), noLease: true})
		})
	}
}

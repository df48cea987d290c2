package charts_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-nats-relay/kube-nats-relay/filter"
)

const (
	// fullname is the chart's full name for release "relay".
	fullname = "relay-kube-nats-relay"
	// releaseNS is the namespace the template tests render into.
	releaseNS = "relay-system"
)

func TestTemplateDefaults(t *testing.T) {
	r := render(t, releaseNS, nil, nil)
	checkRBAC(t, r, rbacWant{cluster: listWatch("apps/deployments")})
	d := r.deployment(t)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s; want 1 and RollingUpdate (leader election is on by default)", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	checkEnv(t, d, map[string]string{
		"RELAY_RESOURCES":             "deployments.apps", // Deployments only: no ConfigMap contents by default
		"NATS_URL":                    "nats://nats:4222",
		"RELAY_HTTP_ADDR":             ":8080",
		"RELAY_LEADER_ELECT":          "true",
		"RELAY_LEADER_ELECTION_LEASE": fullname,
		"RELAY_IDENTITY":              "", // the relay's host name and random suffix
		"RELAY_RULES_FILE":            "",
		"RELAY_NATS_DATA_DIR":         "",
		"KUBECONFIG":                  "",
		"RELAY_CLUSTER":               "", // the relay's default
	})

	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != fullname {
		t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, fullname)
	}
	if len(r.all("ServiceAccount")) != 1 || r.all("ServiceAccount")[0].Name != fullname {
		t.Errorf("ServiceAccounts %v, want one named %s", r.all("ServiceAccount"), fullname)
	}
	psc := pod.SecurityContext
	if psc == nil || !ptrTrue(psc.RunAsNonRoot) || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v, want runAsNonRoot, uid 65532, RuntimeDefault seccomp", psc)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || !ptrTrue(sc.RunAsNonRoot) || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		!ptrTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v, want non-root 65532, read-only root, no privilege escalation, drop ALL, RuntimeDefault", sc)
	}
	if c.Image != "kube-nats-relay:0.1.0" {
		t.Errorf("image %q, want the appVersion tag", c.Image)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports %+v, want http 8080", c.Ports)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v, want memory request and limit", c.Resources)
	}
	if m, _ := mount(t, d, "/tmp"); m.ReadOnly {
		t.Errorf("/tmp is read-only")
	}

	svc := r.service(t)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http-metrics" || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service ports %+v, want http-metrics 8080 -> http", svc.Spec.Ports)
	}
	if pdb := r.pdb(t); pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1", pdb.Spec)
	}
	for _, kind := range []string{"ServiceMonitor", "ConfigMap"} {
		if n := len(r.all(kind)); n != 0 {
			t.Errorf("%d %s rendered by default, want none", n, kind)
		}
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func TestTemplateReplicasTurnOnLeaderElection(t *testing.T) {
	r := render(t, releaseNS, nil, []string{"replicaCount=2"})
	d := r.deployment(t)
	if *d.Spec.Replicas != 2 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s; want 2 and RollingUpdate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	env := checkEnv(t, d, map[string]string{
		"RELAY_LEADER_ELECT":          "true",
		"RELAY_LEADER_ELECTION_LEASE": fullname,
	})
	checkFieldRef(t, env, "RELAY_LEADER_ELECTION_NAMESPACE", "metadata.namespace")
	if e, ok := env["RELAY_IDENTITY"]; ok {
		t.Errorf("env RELAY_IDENTITY = %+v, want it unset: the relay's default keeps a random suffix", e)
	}
	checkRBAC(t, r, rbacWant{
		cluster: listWatch("apps/deployments"),
		leaseNS: releaseNS, lease: fullname,
	})

	// A lease of another name in another namespace.
	r = render(t, releaseNS, nil, []string{"replicaCount=2", "leaderElection.leaseName=my-lease", "leaderElection.namespace=leases", "leaderElection.leaseDuration=20s"})
	checkEnv(t, r.deployment(t), map[string]string{
		"RELAY_LEADER_ELECTION_LEASE":     "my-lease",
		"RELAY_LEADER_ELECTION_NAMESPACE": "leases",
		"RELAY_LEASE_DURATION":            "20s",
	})
	checkRBAC(t, r, rbacWant{cluster: listWatch("apps/deployments"), leaseNS: "leases", lease: "my-lease"})

	// One replica with leader election asked for explicitly.
	r = render(t, releaseNS, nil, []string{"leaderElection.enabled=true"})
	checkEnv(t, r.deployment(t), map[string]string{"RELAY_LEADER_ELECT": "true"})
}

func TestTemplateNamespacesGetRoles(t *testing.T) {
	r := render(t, releaseNS, []string{"namespaces.yaml"}, nil)
	nsGrants := listWatch("/pods", "apps/deployments", "example.com/widgets")
	checkRBAC(t, r, rbacWant{
		cluster:    listWatch("/nodes", "storage.k8s.io/storageclasses", "example.com/gadgets"),
		namespaced: map[string][]string{"team-a": nsGrants, "team-b": nsGrants},
	})
	checkEnv(t, r.deployment(t), map[string]string{
		"RELAY_RESOURCES":  "pods,deployments.v1.apps,widgets.example.com,nodes,storageclasses.storage.k8s.io,gadgets.v1beta1.example.com",
		"RELAY_NAMESPACES": "team-a,team-b",
	})
}

func TestTemplateRulesFile(t *testing.T) {
	r := render(t, releaseNS, []string{"rules.yaml"}, nil)
	d := r.deployment(t)
	checkEnv(t, d, map[string]string{"RELAY_RULES_FILE": "/etc/kube-nats-relay/rules/rules.yaml", "RELAY_RESOURCES": "configmaps"})
	m, v := mount(t, d, "/etc/kube-nats-relay/rules")
	if !m.ReadOnly || v.ConfigMap == nil || v.ConfigMap.Name != fullname+"-rules" {
		t.Errorf("rules mount %+v from %+v, want read-only from ConfigMap %s-rules", m, v, fullname)
	}
	var cm corev1.ConfigMap
	r.decode(t, "ConfigMap", &cm)
	var got, want map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["rules.yaml"]), &got); err != nil {
		t.Fatalf("rules.yaml in the ConfigMap: %v", err)
	}
	if err := yaml.Unmarshal(mustRead(t, "testdata/rules.yaml"), &want); err != nil {
		t.Fatal(err)
	}
	if gj, wj := mustJSON(t, got), mustJSON(t, want["rules"]); gj != wj {
		t.Errorf("rules.yaml = %s, want the values' rules %s", gj, wj)
	}
	// The relay must accept what the chart mounts.
	if _, err := filter.Parse("rules.yaml", []byte(cm.Data["rules.yaml"])); err != nil {
		t.Errorf("the relay rejects the chart's rules file: %v", err)
	}
	if d.Spec.Template.Annotations["checksum/rules"] == "" {
		t.Errorf("no checksum/rules annotation: pods would not restart when the rules change")
	}
	// configmaps in team-a (relay.namespaces); services in the rule's own team-c; jobs with a
	// namespace selector in relay.namespaces (the selector applies within them) plus list and
	// watch on namespaces; secrets (no namespaces in the rule) in relay.namespaces.
	checkRBAC(t, r, rbacWant{
		cluster: listWatch("/namespaces"),
		namespaced: map[string][]string{
			"team-a": listWatch("/configmaps", "/secrets", "batch/jobs"),
			"team-c": listWatch("/services"),
		},
	})
}

func TestTemplateRulesDefaults(t *testing.T) {
	r := render(t, releaseNS, []string{"rules-defaults.yaml"}, nil)
	checkEnv(t, r.deployment(t), map[string]string{"RELAY_RULES_FILE": "/etc/kube-nats-relay/rules/rules.yaml"})
	checkRBAC(t, r, rbacWant{
		cluster:    listWatch("apps/deployments"),
		namespaced: map[string][]string{"team-c": listWatch("/services"), "team-d": listWatch("/configmaps", "batch/jobs")},
	})
}

func TestTemplateNamespaceSelector(t *testing.T) {
	r := render(t, releaseNS, nil, []string{"relay.namespaceSelector=relay=on", "relay.namespaces={team-a}"})
	checkEnv(t, r.deployment(t), map[string]string{"RELAY_NAMESPACE_SELECTOR": "relay=on"})
	// The selector applies within the listed namespaces: Roles there, plus namespaces to
	// follow their labels.
	checkRBAC(t, r, rbacWant{cluster: listWatch("/namespaces"), namespaced: map[string][]string{
		"team-a": listWatch("apps/deployments")}})
}

func TestTemplateServiceMonitor(t *testing.T) {
	r := render(t, releaseNS, []string{"servicemonitor.yaml"}, nil)
	var sm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector  struct{ MatchLabels map[string]string } `json:"selector"`
			Endpoints []struct{ Port, Path, Interval string } `json:"endpoints"`
		} `json:"spec"`
	}
	r.decode(t, "ServiceMonitor", &sm)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http-metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want port http-metrics path /metrics", sm.Spec.Endpoints)
	}
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v, want serviceMonitor.labels included", sm.Metadata.Labels)
	}
	svc := r.service(t)
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service has %v", k, v, svc.Labels)
		}
	}
}

func TestTemplateNATSFromExistingSecret(t *testing.T) {
	r := render(t, releaseNS, []string{"nats-secret.yaml"}, nil)
	d := r.deployment(t)
	checkEnv(t, d, map[string]string{
		"NATS_URL":            "tls://nats-0.nats:4222,tls://nats-1.nats:4222",
		"RELAY_NATS_CREDS":    "/etc/kube-nats-relay/nats-auth/relay.creds",
		"RELAY_NATS_TLS_CA":   "/etc/kube-nats-relay/nats-tls/ca.crt",
		"RELAY_NATS_TLS_CERT": "/etc/kube-nats-relay/nats-tls/tls.crt",
		"RELAY_NATS_TLS_KEY":  "/etc/kube-nats-relay/nats-tls/tls.key",
		"RELAY_NATS_TOKEN":    "",
		"RELAY_NATS_NKEY":     "",
	})
	// User and password instead of the creds file: from the Secret, never in the manifest.
	userEnv := envOf(t, render(t, releaseNS, []string{"nats-secret.yaml"}, []string{"nats.auth.credsKey=", "nats.auth.userKey=user", "nats.auth.passwordKey=password"}).deployment(t))
	for name, key := range map[string]string{"RELAY_NATS_USER": "user", "RELAY_NATS_PASSWORD": "password"} {
		e := userEnv[name]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "nats-relay-auth" || e.ValueFrom.SecretKeyRef.Key != key || e.Value != "" {
			t.Errorf("env %s = %+v, want it from Secret nats-relay-auth key %s", name, e, key)
		}
	}
	for dir, secret := range map[string]string{"/etc/kube-nats-relay/nats-auth": "nats-relay-auth", "/etc/kube-nats-relay/nats-tls": "nats-relay-tls"} {
		m, v := mount(t, d, dir)
		if !m.ReadOnly || v.Secret == nil || v.Secret.SecretName != secret {
			t.Errorf("mount %s %+v from %+v, want read-only from Secret %s", dir, m, v, secret)
		}
	}
	if strings.Contains(r.yaml, "password:") {
		t.Errorf("a password appears in the rendered manifests")
	}
}

func TestTemplateEnvOverrides(t *testing.T) {
	r := render(t, releaseNS, nil, []string{"relay.cluster=prod", "env.RELAY_CLUSTER=staging", "env.RELAY_LOG_LEVEL=debug"})
	checkEnv(t, r.deployment(t), map[string]string{"RELAY_CLUSTER": "staging", "RELAY_LOG_LEVEL": "debug"})
}

func TestTemplateSetsGOMEMLIMITFromTheMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want string // "": unset
	}{
		{"the default limit, 256Mi at 90%", nil, "241591910"},
		{"decimal suffix", []string{"resources.limits.memory=1G"}, "900000000"},
		{"fraction", []string{"resources.limits.memory=1.5Gi"}, "1449551462"},
		{"plain bytes", []string{"resources.limits.memory=1000000"}, "900000"},
		{"another percentage", []string{"goMemLimitPercent=50"}, "134217728"},
		{"no limit: the relay reads its cgroup", []string{"resources.limits=null"}, ""},
		{"env overrides it", []string{"env.GOMEMLIMIT=100MiB"}, "100MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkEnv(t, render(t, releaseNS, nil, tc.sets).deployment(t), map[string]string{"GOMEMLIMIT": tc.want})
		})
	}
}

func TestTemplateRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
		want  string
	}{
		{"no resources", nil, []string{"relay.resources=null"}, "nothing to watch"},
		{"replicas with embedded NATS", []string{"embedded.yaml"}, []string{"replicaCount=2"}, "needs nats.urls"},
		{"replicas without leader election", nil, []string{"replicaCount=2", "leaderElection.enabled=false"}, "needs leader election"},
		{"unknown log level", nil, []string{"relay.logLevel=loud"}, "logLevel"},
		{"misspelt value", nil, []string{"relay.namespace=x"}, "namespace"},
		{"kind instead of resource", nil, []string{"relay.resources={Deployment}"}, "resources"},
		{"bad duration", nil, []string{"relay.maxAge=3 days"}, "maxAge"},
		{"bad quantity", nil, []string{"relay.memoryBudget=64MB"}, "memoryBudget"},
		{"memory limit the chart cannot read", nil, []string{"resources.limits.memory=1e9"}, "resources.limits.memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderRaw(t, releaseNS, tc.files, tc.sets)
			if err == nil {
				t.Fatalf("helm template succeeded, want an error mentioning %q:\n%s", tc.want, out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestLint(t *testing.T) {
	helm := tool(t, "helm")
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
	}{
		{"defaults", nil, nil},
		{"replicas", nil, []string{"replicaCount=2"}},
		{"namespaces", []string{"namespaces.yaml"}, nil},
		{"rules", []string{"rules.yaml"}, nil},
		{"servicemonitor", []string{"servicemonitor.yaml"}, nil},
		{"nats secret", []string{"nats-secret.yaml"}, nil},
		{"embedded", []string{"embedded.yaml"}, nil},
		{"all", []string{"all.yaml"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"lint", chartDir, "--strict", "--namespace", releaseNS}, helmArgs(tc.files, tc.sets)...)
			out, err := run(t, helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint output:\n%s", out)
			}
		})
	}
}

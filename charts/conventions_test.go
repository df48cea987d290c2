package charts_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// testDigest is a well-formed image digest.
const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestTemplateImageDigestWinsOverTheTag(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"appVersion by default", nil, "kube-nats-relay:0.1.0"},
		{"tag", []string{"image.tag=1.2.3"}, "kube-nats-relay:1.2.3"},
		{"digest", []string{"image.digest=" + testDigest}, "kube-nats-relay@" + testDigest},
		{"digest beats tag", []string{"image.tag=1.2.3", "image.digest=" + testDigest, "image.repository=registry.example.com/relay"}, "registry.example.com/relay@" + testDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := render(t, releaseNS, nil, tc.sets).deployment(t).Spec.Template.Spec.Containers[0]
			if c.Image != tc.want {
				t.Errorf("image %q, want %q", c.Image, tc.want)
			}
		})
	}
	for _, bad := range []string{"0123456789abcdef", "sha256:XYZ", "sha512:" + strings.Repeat("a", 128)} {
		if out, err := renderRaw(t, releaseNS, nil, []string{"image.digest=" + bad}); err == nil || !strings.Contains(err.Error(), "digest") {
			t.Errorf("image.digest=%s rendered (err %v), want an error naming image.digest:\n%s", bad, err, out)
		}
	}
}

func TestTemplateMountsTheTokenOnlyWhereTheRelayUsesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		pod  bool
	}{
		{"service account mode", nil, true},
		{"kubeconfig mode", []string{"kubeconfig.existingSecret=remote-cluster"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, releaseNS, nil, tc.sets)
			pod := r.deployment(t).Spec.Template.Spec
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken != tc.pod {
				t.Errorf("pod automountServiceAccountToken %v, want %v", pod.AutomountServiceAccountToken, tc.pod)
			}
			var sa corev1.ServiceAccount
			r.decode(t, "ServiceAccount", &sa)
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Errorf("ServiceAccount automountServiceAccountToken %v, want false (explicit)", sa.AutomountServiceAccountToken)
			}
		})
	}
}

func TestTemplateExtraVolumesAndHistory(t *testing.T) {
	d := render(t, releaseNS, []string{"conventions.yaml"}, nil).deployment(t)
	if d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 1 {
		t.Errorf("revisionHistoryLimit %v, want 1", d.Spec.RevisionHistoryLimit)
	}
	m, v := mount(t, d, "/etc/company-ca")
	if !m.ReadOnly || v.ConfigMap == nil || v.ConfigMap.Name != "company-ca" {
		t.Errorf("extra mount %+v of volume %+v, want company-ca read-only", m, v)
	}
	// The chart's own mounts stay.
	mount(t, d, "/tmp")
	if def := render(t, releaseNS, nil, nil).deployment(t); def.Spec.RevisionHistoryLimit == nil || *def.Spec.RevisionHistoryLimit != 3 {
		t.Errorf("default revisionHistoryLimit %v, want 3", def.Spec.RevisionHistoryLimit)
	}
}

func TestTemplateSpreadsReplicasSoftly(t *testing.T) {
	userSpread := `topologySpreadConstraints[0].maxSkew=2,topologySpreadConstraints[0].topologyKey=rack,topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule`
	for _, tc := range []struct {
		name       string
		sets       []string
		wantKeys   []string // topology keys of the constraints, in order
		wantSoft   bool     // every constraint ScheduleAnyway
		wantAnti   bool     // podAntiAffinity present
		wantAffNil bool
	}{
		{"one replica: nothing to spread", nil, nil, false, false, true},
		{"two replicas: nodes and zones, softly", []string{"replicaCount=2"}, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, true, false, true},
		{"spreadReplicas off", []string{"replicaCount=2", "spreadReplicas=false"}, nil, false, false, true},
		{"user constraints win", []string{"replicaCount=2", userSpread}, []string{"rack"}, false, false, true},
		{"user anti-affinity wins", []string{"replicaCount=2",
			"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=kubernetes.io/hostname",
			"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app=x"}, nil, false, true, false},
		{"node affinity keeps the spread", []string{"replicaCount=2", "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
			"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=infra",
			"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists"},
			[]string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := render(t, releaseNS, nil, tc.sets).deployment(t).Spec.Template.Spec
			var keys []string
			for _, c := range pod.TopologySpreadConstraints {
				keys = append(keys, c.TopologyKey)
				if tc.wantSoft {
					if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 {
						t.Errorf("constraint %s: %s maxSkew %d, want ScheduleAnyway and 1", c.TopologyKey, c.WhenUnsatisfiable, c.MaxSkew)
					}
					if c.LabelSelector == nil || c.LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "relay" ||
						c.LabelSelector.MatchLabels["app.kubernetes.io/name"] != "kube-nats-relay" {
						t.Errorf("constraint %s selects %v, want the release's pods", c.TopologyKey, c.LabelSelector)
					}
					if !slices.Equal(c.MatchLabelKeys, []string{"pod-template-hash"}) {
						t.Errorf("constraint %s matchLabelKeys %v, want pod-template-hash", c.TopologyKey, c.MatchLabelKeys)
					}
				}
			}
			if !slices.Equal(keys, tc.wantKeys) {
				t.Errorf("topology keys %q, want %q", keys, tc.wantKeys)
			}
			if got := pod.Affinity != nil && pod.Affinity.PodAntiAffinity != nil; got != tc.wantAnti {
				t.Errorf("podAntiAffinity present %v, want %v", got, tc.wantAnti)
			}
			if got := pod.Affinity == nil; got != tc.wantAffNil {
				t.Errorf("affinity %+v, want nil %v", pod.Affinity, tc.wantAffNil)
			}
		})
	}
}

// TestConventionsApply sends the conventions' objects to the real apiserver (server-side dry
// run, restricted Pod Security): digest, extra volumes, spread constraints with
// matchLabelKeys, the token settings in both modes.
func TestConventionsApply(t *testing.T) {
	cs := kubeClient(t)
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
	}{
		{"conventions", []string{"conventions.yaml"}, nil},
		{"kubeconfig mode", nil, []string{"kubeconfig.existingSecret=remote-cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := relaytest.Name(t)
			ensureNamespace(t, cs, ns)
			r := render(t, ns, tc.files, tc.sets)
			out := applyManifests(t, r.yaml, true)
			if !strings.Contains(out, "deployment.apps/"+fullname) {
				t.Errorf("kubectl did not apply the Deployment:\n%s", out)
			}
		})
	}
	// The spread of two replicas as stored: the apiserver keeps matchLabelKeys (the feature is
	// on) and the constraints as the chart wrote them.
	ns := relaytest.Name(t)
	ensureNamespace(t, cs, ns)
	r := render(t, ns, []string{"conventions.yaml"}, nil)
	var objs []string
	for _, o := range r.objs {
		if o.Kind == "Deployment" {
			objs = append(objs, string(o.JSON))
		}
	}
	applyManifests(t, strings.Join(objs, "\n---\n"), false)
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkStoredSpread(t, d)
}

func checkStoredSpread(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	cons := d.Spec.Template.Spec.TopologySpreadConstraints
	if len(cons) != 2 {
		t.Fatalf("stored Deployment has %d spread constraints, want 2", len(cons))
	}
	for _, c := range cons {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || !slices.Equal(c.MatchLabelKeys, []string{"pod-template-hash"}) {
			t.Errorf("stored constraint %+v, want ScheduleAnyway with matchLabelKeys pod-template-hash", c)
		}
	}
	if d.Spec.Template.Spec.Containers[0].Image != "kube-nats-relay@"+testDigest {
		t.Errorf("stored image %q, want the digest", d.Spec.Template.Spec.Containers[0].Image)
	}
}

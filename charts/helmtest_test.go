package charts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// hookPod returns the rendered helm test Pod, checking that it is a test hook.
func hookPod(t *testing.T, r *rendered) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	r.decode(t, "Pod", &pod)
	if got := pod.Annotations["helm.sh/hook"]; got != "test" {
		t.Errorf("test pod hook %q, want test", got)
	}
	return pod
}

// hook is one container of the test pod as a run of the image's entrypoint, the relay binary.
type hook struct {
	args []string
	vars map[string]string
}

// hookCommand is one container of the test pod as a command: the image's entrypoint (the
// relay binary) with the container's args, $(VAR) expanded from its environment as the
// kubelet does. addrs replaces the values of the variables that hold in-cluster addresses
// (Service DNS names) by the test bed's; every other variable must have a literal value and
// is passed on unchanged.
func hookCommand(t *testing.T, c corev1.Container, addrs map[string]string) hook {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		v, ok := addrs[e.Name]
		if !ok {
			if e.ValueFrom != nil {
				t.Fatalf("container %s: env %s comes from %+v; this test passes literal values only", c.Name, e.Name, e.ValueFrom)
			}
			v = e.Value
		}
		vars[e.Name] = v
	}
	for name := range addrs {
		if _, ok := vars[name]; !ok {
			t.Fatalf("container %s has no env %s; it has %+v", c.Name, name, c.Env)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		args = append(args, ref.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		}))
	}
	if len(c.Command) != 0 {
		t.Fatalf("container %s overrides the entrypoint with %q", c.Name, c.Command)
	}
	if _, ok := vars["HOME"]; !ok {
		vars["HOME"] = t.TempDir() // a home of its own, not the test user's
	}
	return hook{args: args, vars: vars}
}

// runHook runs a hook command and returns its exit code and combined output.
func runHook(t *testing.T, h hook) (int, string) {
	t.Helper()
	return relaytest.Run(t, relayBin, h.vars, h.args...)
}

// TestHelmTestHookChecksReadinessAndAnEvent renders the helm test pod, creates it on the real
// apiserver (restricted Pod Security, no ServiceAccount token), and runs its containers'
// exact command lines against a real relay (the chart's ServiceAccount and environment) and
// nats-server: /readyz and an event of this cluster pass; a cluster without events, and a
// relay that is gone, fail with a message that says so.
func TestHelmTestHookChecksReadinessAndAnEvent(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	name := relaytest.Name(t)
	ensureNamespace(t, cs, name)
	// An object to relay: the initial sync publishes it.
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sets := []string{"relay.resources={configmaps}", "relay.namespaces={" + name + "}",
		"relay.cluster=" + name, "relay.stream=" + strings.ToUpper(name), "nats.urls={" + env.NATS.URL() + "}"}
	r := render(t, name, nil, sets)
	pod := hookPod(t, r)
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("test pod automountServiceAccountToken %v, want false", pod.Spec.AutomountServiceAccountToken)
	}
	if len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 1 {
		t.Fatalf("test pod has %d init containers and %d containers, want 1 and 1 (readyz, then event)", len(pod.Spec.InitContainers), len(pod.Spec.Containers))
	}
	readyz, event := pod.Spec.InitContainers[0], pod.Spec.Containers[0]
	relay := r.deployment(t).Spec.Template.Spec.Containers[0]
	for _, c := range []corev1.Container{readyz, event} {
		if c.Image != relay.Image || !equalJSON(t, c.SecurityContext, relay.SecurityContext) {
			t.Errorf("test container %s runs %s with %+v, want the relay's image %s and securityContext", c.Name, c.Image, c.SecurityContext, relay.Image)
		}
	}
	if !equalJSON(t, pod.Spec.SecurityContext, r.deployment(t).Spec.Template.Spec.SecurityContext) {
		t.Errorf("test pod securityContext %+v, want the relay pod's", pod.Spec.SecurityContext)
	}
	// The hook objects on the real apiserver, for real (nothing runs them here).
	var hooks []string
	for _, o := range r.objs {
		if o.Kind == "Pod" {
			hooks = append(hooks, string(o.JSON))
		}
	}
	applyManifests(t, strings.Join(hooks, "\n---\n"), false)
	stored, err := cs.CoreV1().Pods(name).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the created test pod: %v", err)
	}
	if len(stored.Spec.Volumes) != 0 {
		t.Errorf("the stored test pod has volumes %+v, want none (no ServiceAccount token, no Secrets)", stored.Spec.Volumes)
	}

	// The relay as the chart runs it.
	kubeconfig := chartIdentity(t, r, name, 5)
	p := relaytest.Start(t, relayBin, chartVars(t, r, name, kubeconfig))
	addr := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(waitLine(t, p, "serving /healthz"))
	if addr == nil {
		t.Fatalf("no address in the relay's health server line:\n%s", p.Output())
	}
	addrs := map[string]string{"RELAY_READYZ_URL": "http://" + addr[1] + "/readyz"}
	if code, out := runHook(t, hookCommand(t, readyz, addrs)); code != 0 {
		t.Fatalf("the readyz check exited %d:\n%s", code, out)
	}
	natsAddr := map[string]string{"NATS_URL": env.NATS.URL()}
	code, out := runHook(t, hookCommand(t, event, natsAddr))
	if code != 0 || !strings.Contains(out, "configmaps") || !strings.Contains(out, name+"/existing") {
		t.Fatalf("the event check exited %d, want 0 and the ConfigMap's event:\n%s", code, out)
	}

	// A release of another cluster name on the same stream has no event: the check fails
	// when its (short) timeout passes, and says so.
	other := hookPod(t, render(t, name, nil, append(sets, "relay.cluster="+name+"-none", "tests.timeout=2s"))).Spec.Containers[0]
	code, out = runHook(t, hookCommand(t, other, natsAddr))
	if code == 0 || !strings.Contains(out, "0 of 1 events arrived within 2s") {
		t.Errorf("the event check without events exited %d, want non-zero and \"0 of 1 events arrived within 2s\":\n%s", code, out)
	}

	// The relay gone: the readyz check fails and names the URL.
	p.Stop(t)
	gone := hookPod(t, render(t, name, nil, append(sets, "tests.timeout=2s"))).Spec.InitContainers[0]
	code, out = runHook(t, hookCommand(t, gone, addrs))
	if code == 0 || !strings.Contains(out, "not ready within 2s") || !strings.Contains(out, addrs["RELAY_READYZ_URL"]) {
		t.Errorf("the readyz check against a stopped relay exited %d, want non-zero naming the URL:\n%s", code, out)
	}
}

// TestTemplateHelmTestPod checks the test pod's variants: NATS credentials and TLS as the
// relay's, only /readyz when NATS cannot be reached (embedded, not exposed) or events are
// off, and no pod when tests are off.
func TestTemplateHelmTestPod(t *testing.T) {
	r := render(t, releaseNS, []string{"nats-secret.yaml"}, nil)
	pod := hookPod(t, r)
	// The Deployment's ReplicaSet would adopt a pod its selector matches, and the Service
	// would route to it.
	sel, err := metav1.LabelSelectorAsSelector(r.deployment(t).Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the test pod's labels %v match the Deployment's selector %s", pod.Labels, sel)
	}
	if svc := labels.SelectorFromSet(r.service(t).Spec.Selector); svc.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the test pod's labels %v match the Service's selector %s", pod.Labels, svc)
	}
	ev := pod.Spec.Containers[0]
	relayEnv := envOf(t, r.deployment(t))
	var names []string
	for _, e := range ev.Env {
		names = append(names, e.Name)
		if !equalJSON(t, e, relayEnv[e.Name]) {
			t.Errorf("test env %+v, want the relay's %+v", e, relayEnv[e.Name])
		}
	}
	want := []string{"NATS_URL", "RELAY_NATS_CREDS", "RELAY_NATS_TLS_CA", "RELAY_NATS_TLS_CERT", "RELAY_NATS_TLS_KEY"}
	if !slices.Equal(names, want) {
		t.Errorf("test env %q, want %q", names, want)
	}
	var mounts []string
	for _, m := range ev.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	if !slices.Equal(mounts, []string{"/etc/kube-nats-relay/nats-auth", "/etc/kube-nats-relay/nats-tls"}) {
		t.Errorf("test mounts %q, want the NATS credentials and TLS files", mounts)
	}
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
	}{
		{"embedded, not exposed", []string{"embedded.yaml"}, nil},
		{"events off", nil, []string{"tests.events=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := hookPod(t, render(t, releaseNS, tc.files, tc.sets))
			if len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Args[0] != "probe" {
				t.Errorf("test pod runs %+v then %+v, want only the readyz probe", pod.Spec.InitContainers, pod.Spec.Containers)
			}
		})
	}
	if n := len(render(t, releaseNS, nil, []string{"tests.enabled=false"}).all("Pod")); n != 0 {
		t.Errorf("tests.enabled=false rendered %d pods, want none", n)
	}
}

// equalJSON compares two values by their JSON form.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

package charts_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child/childtest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// notes returns the release notes helm prints for an install with these values (a client-side
// dry run against the test apiserver).
func notes(t *testing.T, ns string, files, sets []string) string {
	t.Helper()
	args := append([]string{"install", "relay", chartDir, "--dry-run=client", "--kubeconfig", env.Kube.KubeconfigPath(), "--namespace", ns}, helmArgs(files, sets)...)
	out, err := run(t, tool(t, "helm"), args...)
	if err != nil {
		t.Fatal(err)
	}
	_, n, ok := strings.Cut(out, "NOTES:")
	if !ok {
		t.Fatalf("helm install printed no NOTES:\n%s", out)
	}
	return n
}

// TestNotesTailFollowsTheReleasesStream runs the `relay tail` command the release notes
// suggest, against a relay configured by the chart with its own stream, subject prefix and
// cluster: it prints the release's events.
func TestNotesTailFollowsTheReleasesStream(t *testing.T) {
	cs := kubeClient(t)
	name := relaytest.Name(t)
	ensureNamespace(t, cs, name)
	sets := []string{"relay.resources={configmaps}", "relay.namespaces={" + name + "}", "relay.stream=" + strings.ToUpper(name) + "-NOTES",
		"relay.subjectPrefix=notes.k8s", "relay.cluster=" + name}
	n := notes(t, name, nil, sets)
	m := regexp.MustCompile(`(?m)exec deploy/\S+ -- /relay tail (.*)$`).FindStringSubmatch(n)
	if m == nil {
		t.Fatalf("the notes suggest no relay tail command:\n%s", n)
	}
	var args []string
	for _, a := range strings.Fields(m[1]) {
		args = append(args, strings.Trim(a, `"`))
	}
	for _, want := range []string{"--stream " + strings.ToUpper(name) + "-NOTES", "--prefix notes.k8s", "--cluster " + name} {
		if !strings.Contains(strings.Join(args, " "), want) {
			t.Errorf("the notes' tail command %q lacks %s", m[1], want)
		}
	}

	r := render(t, name, nil, sets)
	vars := chartVars(t, r, name, env.Kube.KubeconfigPath())
	p := relaytest.Start(t, relayBin, vars)
	p.WaitWatching(t, relaytest.JetStream(t, env), vars["RELAY_CHECKPOINT_BUCKET"], 1)
	if _, err := cs.CoreV1().ConfigMaps(name).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tailed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The notes' command, from the start of the stream, against the test bed's NATS (in the
	// pod NATS_URL says where it is).
	var (
		mu   sync.Mutex
		seen []string
		once sync.Once
	)
	tailed := make(chan struct{})
	tail := childtest.Start(t, child.Spec{
		Name: "relay tail", Path: relayBin, Args: append([]string{"tail", "--all", "--server", env.NATS.URL()}, args...),
		Stdout: func(line string) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, line)
			if strings.Contains(line, "tailed") {
				once.Do(func() { close(tailed) })
			}
		},
	})
	select {
	case <-tailed:
		p.Stop(t)
		return
	case <-tail.Done():
	case <-time.After(eventTimeout):
	}
	mu.Lock()
	printed := strings.Join(seen, "\n")
	mu.Unlock()
	t.Fatalf("relay tail %v printed no event of ConfigMap %s/tailed (exited: %v); it printed:\n%s", args, name, tail.Exited(), printed)
}

// TestNotesSayWhatIsRelayedAndWhereInEachMode: the release notes name the resources when only
// the rules list them, print NATS URLs without their credentials, say that a kubeconfig's
// cluster is watched and holds the Lease, and keep the readiness and the events paragraphs
// apart.
func TestNotesSayWhatIsRelayedAndWhereInEachMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want []string
	}{
		{"defaults", nil, []string{"relays deployments.apps in all namespaces to", "/readyz\n\nEvents arrive"}},
		{"resources in the rules only", []string{"relay.resources=null", "rules.resources[0].resource=configmaps"},
			[]string{"relays the resources of its rules in all namespaces (ConfigMap "}},
		{"credentials in the NATS URLs", []string{"nats.urls={nats://relay:s3cret@a:4222,tls://tok3n@b:4222}"},
			[]string{"to nats://<redacted>@a:4222,tls://<redacted>@b:4222."}},
		{"stream named after the cluster", []string{"relay.cluster=prod"},
			[]string{"in the JetStream stream KUBE_prod.", `--stream "KUBE_prod"`}},
		{"kubeconfig mode", []string{"kubeconfig.existingSecret=remote-cluster"},
			[]string{"in all namespaces of the cluster of kubeconfig.existingSecret", "in the cluster of kubeconfig.existingSecret, relays", "kubectl --kubeconfig "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := notes(t, releaseNS, nil, tc.sets)
			for _, want := range tc.want {
				if !strings.Contains(n, want) {
					t.Errorf("the notes lack %q:\n%s", want, n)
				}
			}
			if strings.Contains(n, "relays  ") {
				t.Errorf("the notes name no resource:\n%s", n)
			}
			if strings.Contains(n, "s3cret") || strings.Contains(n, "tok3n") {
				t.Errorf("the notes print NATS credentials:\n%s", n)
			}
		})
	}
}

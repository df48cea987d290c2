package charts_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// policyRule is a NetworkPolicy rule in short: "proto/port,..." and its peers, each as
// "cidr", "pods:<labels>", "ns:<labels>" or "raw".
type policyRule struct {
	ports string
	peers []string
}

func shortPorts(ps []networkingv1.NetworkPolicyPort) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
	}
	return strings.Join(out, ",")
}

func shortPeers(ps []networkingv1.NetworkPolicyPeer) []string {
	var out []string
	for _, p := range ps {
		switch {
		case p.IPBlock != nil:
			out = append(out, p.IPBlock.CIDR)
		case p.NamespaceSelector != nil:
			out = append(out, "ns:"+metav1.FormatLabelSelector(p.NamespaceSelector))
		case p.PodSelector != nil:
			out = append(out, "pods:"+metav1.FormatLabelSelector(p.PodSelector))
		}
	}
	return out
}

func policyRules(np networkingv1.NetworkPolicy) (ingress, egress []policyRule) {
	for _, r := range np.Spec.Ingress {
		ingress = append(ingress, policyRule{shortPorts(r.Ports), shortPeers(r.From)})
	}
	for _, r := range np.Spec.Egress {
		egress = append(egress, policyRule{shortPorts(r.Ports), shortPeers(r.To)})
	}
	return ingress, egress
}

func equalRules(a, b []policyRule) bool {
	return slices.EqualFunc(a, b, func(x, y policyRule) bool { return x.ports == y.ports && slices.Equal(x.peers, y.peers) })
}

const testPodPeer = "pods:app.kubernetes.io/component=test,app.kubernetes.io/instance=relay"

var (
	apiserverRule = policyRule{"TCP/443,TCP/6443", []string{"0.0.0.0/0", "::/0"}}
	dnsRule       = policyRule{"UDP/53,TCP/53", nil}
)

func TestTemplateNetworkPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		sets    []string
		ingress []policyRule
		egress  []policyRule
	}{
		{"nats urls: ports from the URLs", nil, []string{"networkPolicy.enabled=true", "nats.urls={nats://a:4222,tls://user:pw@b.nats:7422,d}"},
			[]policyRule{{"TCP/http", nil}},
			[]policyRule{apiserverRule, {"TCP/4222,TCP/7422", nil}, dnsRule}},
		// The relay takes websocket or plain URLs, never both (the chart refuses the mix).
		{"websocket urls: ports from the URLs", nil, []string{"networkPolicy.enabled=true", "nats.urls={wss://c,ws://e}"},
			[]policyRule{{"TCP/http", nil}},
			[]policyRule{apiserverRule, {"TCP/443,TCP/80", nil}, dnsRule}},
		{"peers and ports given", nil, []string{"networkPolicy.enabled=true",
			"networkPolicy.metrics.from[0].namespaceSelector.matchLabels.team=monitoring",
			"networkPolicy.apiserver.cidrs={10.0.0.10/32}", "networkPolicy.apiserver.ports={6443}",
			"networkPolicy.nats.ports={4223}", "networkPolicy.nats.to[0].namespaceSelector.matchLabels.app=nats",
			"networkPolicy.dns.to[0].namespaceSelector.matchLabels.dns=yes"},
			[]policyRule{{"TCP/http", []string{"ns:team=monitoring", testPodPeer}}},
			[]policyRule{{"TCP/6443", []string{"10.0.0.10/32"}}, {"TCP/4223", []string{"ns:app=nats"}}, {"UDP/53,TCP/53", []string{"ns:dns=yes"}}}},
		{"embedded, not exposed: no nats port, no NATS egress", []string{"embedded.yaml"}, []string{"networkPolicy.enabled=true"},
			[]policyRule{{"TCP/http", nil}},
			[]policyRule{apiserverRule, dnsRule}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var np networkingv1.NetworkPolicy
			render(t, releaseNS, tc.files, tc.sets).decode(t, "NetworkPolicy", &np)
			if got := metav1.FormatLabelSelector(&np.Spec.PodSelector); got != "app.kubernetes.io/instance=relay,app.kubernetes.io/name=kube-nats-relay" {
				t.Errorf("policy selects %s, want the relay's pods", got)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
				t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
			}
			ingress, egress := policyRules(np)
			if !equalRules(ingress, tc.ingress) {
				t.Errorf("ingress\n got %+v\nwant %+v", ingress, tc.ingress)
			}
			if !equalRules(egress, tc.egress) {
				t.Errorf("egress\n got %+v\nwant %+v", egress, tc.egress)
			}
		})
	}
	if n := len(render(t, releaseNS, nil, nil).all("NetworkPolicy")); n != 0 {
		t.Errorf("%d NetworkPolicies by default, want none", n)
	}
}

// TestTemplateNetworkPolicyExposedEmbedded checks the nats port's ingress when the embedded
// server is exposed (nats.embedded.expose, with the token it then requires), the test pod
// among its peers, and that the test pod reaches that server through the Service's nats port
// with the relay's token.
func TestTemplateNetworkPolicyExposedEmbedded(t *testing.T) {
	r := render(t, releaseNS, []string{"embedded.yaml"}, []string{"networkPolicy.enabled=true", "nats.embedded.expose=true",
		"nats.embedded.listen=127.0.0.1:4333", "nats.auth.existingSecret=nats-auth", "nats.auth.tokenKey=token",
		"networkPolicy.natsClients.from[0].namespaceSelector.matchLabels.team=consumers"})
	var np networkingv1.NetworkPolicy
	r.decode(t, "NetworkPolicy", &np)
	ingress, _ := policyRules(np)
	want := []policyRule{{"TCP/http", nil}, {"TCP/nats", []string{"ns:team=consumers", testPodPeer}}}
	if !equalRules(ingress, want) {
		t.Errorf("ingress\n got %+v\nwant %+v", ingress, want)
	}

	var nats []string
	for _, p := range r.service(t).Spec.Ports {
		if p.Name == "nats" {
			nats = append(nats, fmt.Sprint(p.Port))
		}
	}
	if !slices.Equal(nats, []string{"4333"}) {
		t.Fatalf("Service nats ports %v, want 4333", nats)
	}
	pod := hookPod(t, r)
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "event" {
		t.Fatalf("test pod containers %+v, want the event check", pod.Spec.Containers)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if want := "nats://" + fullname + "." + releaseNS + ".svc:4333"; env["NATS_URL"] != want {
		t.Errorf("test pod NATS_URL %q, want %q", env["NATS_URL"], want)
	}
	if env["RELAY_NATS_TOKEN"] != "nats-auth/token" {
		t.Errorf("test pod RELAY_NATS_TOKEN from %q, want Secret nats-auth key token", env["RELAY_NATS_TOKEN"])
	}
	if _, ok := env["RELAY_NATS_LISTEN"]; ok {
		t.Errorf("test pod env %v sets the server's RELAY_NATS_LISTEN", env)
	}
}

// TestNetworkPolicyApplies creates the policy on the real apiserver and reads it back. (No
// CNI enforces it in the test bed: what it lets through is checked by the template tests.)
func TestNetworkPolicyApplies(t *testing.T) {
	cs := kubeClient(t)
	ns := relaytest.Name(t)
	ensureNamespace(t, cs, ns)
	r := render(t, ns, nil, []string{"networkPolicy.enabled=true", "networkPolicy.metrics.from[0].namespaceSelector.matchLabels.team=monitoring"})
	applyManifests(t, r.yaml, false)
	np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ingress, egress := policyRules(*np)
	wantIn := []policyRule{{"TCP/http", []string{"ns:team=monitoring", "pods:app.kubernetes.io/component=test,app.kubernetes.io/instance=relay"}}}
	wantOut := []policyRule{apiserverRule, {"TCP/4222", nil}, dnsRule}
	if !equalRules(ingress, wantIn) || !equalRules(egress, wantOut) {
		t.Errorf("stored policy ingress %+v egress %+v, want %+v and %+v", ingress, egress, wantIn, wantOut)
	}
}

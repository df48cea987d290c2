package charts_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
)

// exposedWithToken are the values of an exposed embedded server that requires a token.
var exposedWithToken = []string{"nats.embedded.expose=true", "nats.auth.existingSecret=nats-auth", "nats.auth.tokenKey=token"}

// natsPorts returns the Service's and the relay container's ports named nats (0: none).
func natsPorts(t *testing.T, r *rendered) (service, container int32) {
	t.Helper()
	for _, p := range r.service(t).Spec.Ports {
		if p.Name == "nats" {
			if p.TargetPort.String() != "nats" {
				t.Errorf("service port nats targets %s, want the container port nats", p.TargetPort.String())
			}
			service = p.Port
		}
	}
	for _, p := range r.deployment(t).Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "nats" {
			container = p.ContainerPort
		}
	}
	return service, container
}

func TestTemplateEmbeddedNATSStaysOnLoopback(t *testing.T) {
	r := render(t, releaseNS, []string{"embedded.yaml"}, nil)
	d := r.deployment(t)
	checkEnv(t, d, map[string]string{"NATS_URL": "", "RELAY_NATS_DATA_DIR": "/data", "RELAY_NATS_LISTEN": "127.0.0.1:4222"})
	if m, v := mount(t, d, "/data"); m.ReadOnly || v.EmptyDir == nil {
		t.Errorf("data mount %+v from %+v, want a writable emptyDir", m, v)
	}
	if svc, c := natsPorts(t, r); svc != 0 || c != 0 {
		t.Errorf("nats ports: service %d, container %d; want none while not exposed", svc, c)
	}
}

func TestTemplateEmbeddedNATSExposedWithCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		// listen is RELAY_NATS_LISTEN; port the Service's and container's nats port.
		listen string
		port   int32
		// secretVars come from the Secret; fileVar names the mounted seed file.
		secretVars map[string]string
		fileVar    string
	}{
		{name: "user and password", sets: []string{"nats.embedded.expose=true", "nats.auth.existingSecret=nats-auth",
			"nats.auth.userKey=user", "nats.auth.passwordKey=password"},
			listen: "0.0.0.0:4222", port: 4222, secretVars: map[string]string{"RELAY_NATS_USER": "user", "RELAY_NATS_PASSWORD": "password"}},
		{name: "token", sets: exposedWithToken, listen: "0.0.0.0:4222", port: 4222, secretVars: map[string]string{"RELAY_NATS_TOKEN": "token"}},
		{name: "nkey", sets: []string{"nats.embedded.expose=true", "nats.auth.existingSecret=nats-auth", "nats.auth.nkeyKey=relay.nk"},
			listen: "0.0.0.0:4222", port: 4222, fileVar: "RELAY_NATS_NKEY"},
		{name: "the port of listen", sets: append([]string{"nats.embedded.listen=127.0.0.1:4333"}, exposedWithToken...),
			listen: "0.0.0.0:4333", port: 4333, secretVars: map[string]string{"RELAY_NATS_TOKEN": "token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, releaseNS, []string{"embedded.yaml"}, tc.sets)
			env := checkEnv(t, r.deployment(t), map[string]string{"NATS_URL": "", "RELAY_NATS_LISTEN": tc.listen})
			for name, key := range tc.secretVars {
				e := env[name]
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "nats-auth" || e.ValueFrom.SecretKeyRef.Key != key {
					t.Errorf("env %s = %+v, want it from Secret nats-auth key %s", name, e, key)
				}
			}
			if tc.fileVar != "" && env[tc.fileVar].Value != "/etc/kube-nats-relay/nats-auth/relay.nk" {
				t.Errorf("env %s = %+v, want the mounted seed file", tc.fileVar, env[tc.fileVar])
			}
			if svc, c := natsPorts(t, r); svc != tc.port || c != tc.port {
				t.Errorf("nats ports: service %d, container %d; want %d", svc, c, tc.port)
			}
		})
	}
}

func TestTemplateEmbeddedNATSRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want []string
	}{
		{"exposed without credentials", []string{"nats.embedded.expose=true"},
			[]string{"nats.embedded.expose=true", "nats.auth.existingSecret", "tokenKey"}},
		{"exposed with keys but no Secret", []string{"nats.embedded.expose=true", "nats.auth.tokenKey=token"},
			[]string{"nats.embedded.expose=true", "nats.auth.existingSecret"}},
		{"exposed with a user but no password", []string{"nats.embedded.expose=true", "nats.auth.existingSecret=s", "nats.auth.userKey=user"},
			[]string{"nats.embedded.expose=true", "passwordKey"}},
		{"exposed with a credentials file only", []string{"nats.embedded.expose=true", "nats.auth.existingSecret=s", "nats.auth.credsKey=relay.creds"},
			[]string{"nats.embedded.expose=true"}},
		{"all interfaces without credentials", []string{"nats.embedded.listen=0.0.0.0:4222"},
			[]string{"nats.embedded.listen=0.0.0.0:4222", "beyond the pod's loopback", "nats.embedded.expose"}},
		{"a host name that starts like a loopback address", []string{"nats.embedded.listen=127.example.com:4222"},
			[]string{"nats.embedded.listen=127.example.com:4222", "beyond the pod's loopback"}},
		{"a credentials file", []string{"nats.auth.existingSecret=s", "nats.auth.credsKey=relay.creds"},
			[]string{"nats.auth.credsKey", "embedded"}},
		{"client TLS", []string{"nats.tls.existingSecret=tls", "nats.tls.caKey=ca.crt"},
			[]string{"nats.tls", "embedded"}},
		{"expose not a boolean", []string{"nats.embedded.expose=yes"}, []string{"expose"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderRaw(t, releaseNS, []string{"embedded.yaml"}, tc.sets)
			if err == nil {
				t.Fatalf("helm template succeeded, want an error mentioning %q:\n%s", tc.want, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one mentioning %q", err, want)
				}
			}
		})
	}
}

// TestEmbeddedNATSExposedByTheChart sends the exposed variant to the real apiserver (server-side
// dry run), then runs the relay with the chart's environment: it relays through its embedded
// server on all interfaces, which requires the token from the Secret and refuses a client
// without it.
func TestEmbeddedNATSExposedByTheChart(t *testing.T) {
	ctx := context.Background()
	cs := kubeClient(t)
	name := relaytest.Name(t)
	ensureNamespace(t, cs, name)
	port := relaytest.FreePort(t)
	r := render(t, name, []string{"embedded.yaml"}, append([]string{"nats.embedded.listen=127.0.0.1:" + port,
		"relay.resources={configmaps}", "relay.namespaces={" + name + "}"}, exposedWithToken...))
	applyManifests(t, r.yaml, true)

	vars := chartVars(t, r, name, env.Kube.KubeconfigPath())
	delete(vars, "NATS_URL")
	if vars["RELAY_NATS_LISTEN"] != "0.0.0.0:"+port {
		t.Fatalf("the chart set RELAY_NATS_LISTEN=%q, want 0.0.0.0:%s", vars["RELAY_NATS_LISTEN"], port)
	}
	vars["RELAY_NATS_DATA_DIR"] = t.TempDir()
	token := "tok-" + rand.Text()
	vars["RELAY_NATS_TOKEN"] = token // what the kubelet would take from the Secret
	if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "exposed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := relaytest.Start(t, relayBin, vars)

	url := "nats://127.0.0.1:" + port
	js, err := jetstream.New(p.Connect(t, url, nats.Token(token)))
	if err != nil {
		t.Fatal(err)
	}
	waitSubject(t, js, vars["RELAY_STREAM"], "kube."+vars["RELAY_CLUSTER"]+".core.v1.configmaps."+name+".exposed.added")
	if anon, err := nats.Connect(url); err == nil {
		anon.Close()
		t.Errorf("a client without the token connected to the exposed embedded server, want it refused")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("a client without the token: got %v, want an authorization violation", err)
	}
	p.Stop(t)
}

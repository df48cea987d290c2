package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

func TestEmbeddedNATSServerKeepsEventsAndCheckpointsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	name, cms := testConfigMaps(t)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + relaytest.FreePort(t)
	vars := embeddedRelayVars(t, name, addr)
	stream := vars["RELAY_STREAM"]
	subject := func(n string, typ event.Type) string {
		return fmt.Sprintf("kube.%s.core.v1.configmaps.%s.%s.%s", name, name, n, typ)
	}

	r := startRelay(t, vars)
	js := connectEmbedded(t, r, "nats://"+addr, testenv.NATSAuth{})
	waitFor(t, js, stream, "the initial sync", func(m []received) bool { return len(m) == 1 && m[0].Subject == subject("first", event.Added) })
	r.stop(t)

	// While the relay (and with it the NATS server) is down.
	if err := cms.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	r = startRelay(t, vars)
	js = connectEmbedded(t, r, "nats://"+addr, testenv.NATSAuth{})
	msgs := waitFor(t, js, stream, "the delete made while stopped", func(m []received) bool { return len(m) >= 2 })
	r.stop(t)
	if len(msgs) != 2 || msgs[1].Subject != subject("first", event.Deleted) || msgs[1].Meta.Origin != event.Live {
		t.Fatalf("after restart on the same storage: got\n%s want the earlier ADDED and one live DELETED", describe(msgs))
	}
}

// embeddedRelayVars configures a relay with an embedded nats-server listening on listen,
// relaying the ConfigMaps of the test's namespace.
func embeddedRelayVars(t *testing.T, name, listen string) map[string]string {
	vars := relayVars(name)
	delete(vars, "NATS_URL")
	vars["RELAY_NATS_LISTEN"] = listen
	vars["RELAY_NATS_DATA_DIR"] = t.TempDir()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	return vars
}

// TestEmbeddedServerRequiresTheRelaysCredentials runs the relay with its embedded server on
// all interfaces and each kind of credentials: the relay relays through it, and a client
// without credentials or with wrong ones is refused.
func TestEmbeddedServerRequiresTheRelaysCredentials(t *testing.T) {
	for _, tc := range []struct {
		method natsAuthMethod
		wrong  func(t *testing.T, right testenv.NATSAuth) testenv.NATSAuth
	}{
		{authUserPassword, func(_ *testing.T, right testenv.NATSAuth) testenv.NATSAuth {
			return testenv.UserPasswordAuth(right.User, "wrong-"+rand.Text())
		}},
		{authToken, func(*testing.T, testenv.NATSAuth) testenv.NATSAuth { return testenv.TokenAuth("wrong-" + rand.Text()) }},
		{authNKey, func(t *testing.T, _ testenv.NATSAuth) testenv.NATSAuth { return mustAuth(t, authNKey) }},
	} {
		t.Run(tc.method.name, func(t *testing.T) {
			right := mustAuth(t, tc.method)
			name := testName(t)
			cmName := namespaceWithConfigMap(t, name)
			port := relaytest.FreePort(t)
			vars := embeddedRelayVars(t, name, "0.0.0.0:"+port)
			for k, v := range authVars(right) {
				vars[k] = v
			}
			url := "nats://127.0.0.1:" + port

			r := startRelay(t, vars)
			js := connectEmbedded(t, r, url, right)
			waitFor(t, js, vars["RELAY_STREAM"], "the configmap's initial sync", func(msgs []received) bool {
				for _, m := range msgs {
					if m.Meta.Name == cmName {
						return true
					}
				}
				return false
			})

			wrongOpts, err := tc.wrong(t, right).ClientOptions()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				opts []nats.Option
			}{{"without credentials", nil}, {"with wrong credentials", wrongOpts}} {
				nc, err := nats.Connect(url, append(c.opts, nats.Timeout(natsAuthConnectTimeout))...)
				if err == nil {
					nc.Close()
					t.Errorf("a client %s connected to the embedded server, want it refused", c.name)
				} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
					t.Errorf("a client %s: got %v, want an authorization violation", c.name, err)
				}
			}
			r.stop(t)
			for _, s := range secretsOf(t, right) {
				if strings.Contains(r.Output(), s) {
					t.Errorf("relay output contains a secret of %s", tc.method.name)
				}
			}
		})
	}
}

// connectEmbedded connects to the embedded server of r at url with auth, waiting for it to
// start.
func connectEmbedded(t *testing.T, r *relayProc, url string, auth testenv.NATSAuth) jetstream.JetStream {
	t.Helper()
	opts, err := auth.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(r.Connect(t, url, append(opts, nats.Timeout(natsAuthConnectTimeout))...))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestEmbeddedServerBeyondLoopbackWithoutCredentialsExits2(t *testing.T) {
	name := testName(t)
	listen := "0.0.0.0:" + relaytest.FreePort(t)
	r := startRelay(t, embeddedRelayVars(t, name, listen))
	select {
	case <-r.Done():
	case <-time.After(time.Minute):
		t.Fatalf("relay still running a minute after start, want exit %d", exitConfig)
	}
	var exit *exec.ExitError
	if !errors.As(r.Err(), &exit) || exit.ExitCode() != exitConfig {
		t.Fatalf("exit: got %s, want exit status %d\n%s", exitStatus(r.Err()), exitConfig, r.Output())
	}
	out := r.Output()
	for _, want := range []string{`RELAY_NATS_LISTEN="` + listen + `"`, "RELAY_NATS_TOKEN", "RELAY_NATS_USER", "RELAY_NATS_NKEY"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

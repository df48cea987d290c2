package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/child"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

const (
	// natsAuthConnectTimeout bounds one connection attempt of a test client, TLS handshake
	// included, on a busy machine.
	natsAuthConnectTimeout = 10 * time.Second
	// refusalDeadline is how long a relay with wrong credentials may take to exit or report
	// the server's refusal. nats.go learns of the refusal on its first attempt, a moment after
	// the relay resolved its resources; 30s leaves room for a busy machine.
	refusalDeadline = 30 * time.Second
)

// natsAuthMethod is one way the relay authenticates to NATS.
type natsAuthMethod struct {
	name string
	// newAuth makes the server's demand and the client material that passes it.
	newAuth func(dir string) (testenv.NATSAuth, error)
}

var (
	authUserPassword = natsAuthMethod{"user and password", func(string) (testenv.NATSAuth, error) {
		return testenv.UserPasswordAuth("relay", "pw-"+rand.Text()), nil
	}}
	authToken = natsAuthMethod{"token", func(string) (testenv.NATSAuth, error) {
		return testenv.TokenAuth("tok-" + rand.Text()), nil
	}}
	authNKey  = natsAuthMethod{"nkey seed file", testenv.NewNKeyAuth}
	authCreds = natsAuthMethod{"credentials file", testenv.NewCredsAuth}
	authTLS   = natsAuthMethod{"tls client certificate", testenv.NewTLSAuth}
)

// authVars returns the relay's variables that present a's client material.
func authVars(a testenv.NATSAuth) map[string]string {
	vars := make(map[string]string)
	for k, v := range map[string]string{
		"RELAY_NATS_USER":     a.User,
		"RELAY_NATS_PASSWORD": a.Password,
		"RELAY_NATS_TOKEN":    a.Token,
		"RELAY_NATS_NKEY":     a.NKeySeedFile,
		"RELAY_NATS_CREDS":    a.CredsFile,
		"RELAY_NATS_TLS_CA":   a.CAFile,
		"RELAY_NATS_TLS_CERT": a.CertFile,
		"RELAY_NATS_TLS_KEY":  a.KeyFile,
	} {
		if v != "" {
			vars[k] = v
		}
	}
	return vars
}

// secretsOf returns what must never appear in the relay's output: the password, the token
// and the NKey seeds in seed and credentials files.
func secretsOf(t *testing.T, a testenv.NATSAuth) []string {
	t.Helper()
	var out []string
	for _, s := range []string{a.Password, a.Token} {
		if s != "" {
			out = append(out, s)
		}
	}
	for _, f := range []string{a.NKeySeedFile, a.CredsFile} {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "SU") {
				out = append(out, line)
			}
		}
	}
	return out
}

// startAuthNATS starts a nats-server of the test's own that demands auth.
func startAuthNATS(t *testing.T, auth testenv.NATSAuth) *testenv.NATSServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := testenv.StartNATS(ctx, env.TempDir(t), testenv.NATSOptions{Auth: auth.ServerConfig})
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nats-server log:\n%s", srv.LogTail())
		}
		_ = srv.Stop()
	})
	return srv
}

// authJSClient connects to url presenting auth's client material.
func authJSClient(t *testing.T, url string, auth testenv.NATSAuth) jetstream.JetStream {
	t.Helper()
	opts, err := auth.ClientOptions()
	if err != nil {
		t.Fatalf("client options: %v", err)
	}
	nc, err := nats.Connect(url, append(opts, nats.Timeout(natsAuthConnectTimeout))...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// namespaceWithConfigMap creates a namespace named name holding one ConfigMap, and returns
// the ConfigMap's name.
func namespaceWithConfigMap(t *testing.T, name string) string {
	t.Helper()
	cs := kubeClient(t)
	createNamespace(t, cs, name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "auth"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps(name).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	return cm.Name
}

// authRelayVars configures a relay for the test's namespace and stream on srv, presenting
// auth's client material.
func authRelayVars(name string, srv *testenv.NATSServer, auth testenv.NATSAuth) map[string]string {
	vars := relayVars(name)
	vars["NATS_URL"] = srv.URL()
	vars["RELAY_RESOURCES"] = "configmaps"
	vars["RELAY_NAMESPACES"] = name
	for k, v := range authVars(auth) {
		vars[k] = v
	}
	return vars
}

func TestNATSAuthRelaysWithEachMethod(t *testing.T) {
	for _, m := range []natsAuthMethod{authUserPassword, authToken, authNKey, authCreds, authTLS} {
		t.Run(m.name, func(t *testing.T) {
			auth, err := m.newAuth(env.TempDir(t))
			if err != nil {
				t.Fatalf("make credentials: %v", err)
			}
			srv := startAuthNATS(t, auth)
			name := testName(t)
			cmName := namespaceWithConfigMap(t, name)
			vars := authRelayVars(name, srv, auth)

			r := startRelay(t, vars)
			js := authJSClient(t, srv.URL(), auth)
			msgs := waitFor(t, js, vars["RELAY_STREAM"], "the configmap's initial sync", func(msgs []received) bool {
				for _, m := range msgs {
					if m.Meta.Name == cmName {
						return true
					}
				}
				return false
			})
			r.stop(t)

			// Other ConfigMaps may appear in a new namespace (kube-root-ca.crt, once a controller
			// manager runs); this one must be there exactly once.
			mine := byObject(msgs)[name+"/"+cmName]
			if len(mine) != 1 {
				t.Fatalf("messages of %s/%s: got %d, want 1:\n%s", name, cmName, len(mine), describe(msgs))
			}
			checkMessage(t, mine[0], "kube")
			if got := mine[0].Meta; got.Namespace != name || got.Type != event.Added || got.Origin != event.InitialSync {
				t.Errorf("event: got %s/%s %s %s, want %s/%s added initial-sync", got.Namespace, got.Name, got.Type, got.Origin, name, cmName)
			}
			out := r.Output()
			for _, s := range secretsOf(t, auth) {
				if strings.Contains(out, s) {
					t.Errorf("relay output contains a secret of %s", m.name)
				}
			}
		})
	}
}

func TestNATSAuthWrongCredentialsFailVisibly(t *testing.T) {
	authRefused := regexp.MustCompile(`(?i)authorization violation`)
	for _, tc := range []struct {
		name   string
		method natsAuthMethod
		// wrong makes client material the server of right refuses.
		wrong func(t *testing.T, right testenv.NATSAuth) testenv.NATSAuth
		// refusal matches the reason the relay must report.
		refusal *regexp.Regexp
	}{
		{
			name:   "wrong password",
			method: authUserPassword,
			wrong: func(_ *testing.T, right testenv.NATSAuth) testenv.NATSAuth {
				return testenv.UserPasswordAuth(right.User, "wrong-"+rand.Text())
			},
			refusal: authRefused,
		},
		{
			name:    "wrong token",
			method:  authToken,
			wrong:   func(*testing.T, testenv.NATSAuth) testenv.NATSAuth { return testenv.TokenAuth("wrong-" + rand.Text()) },
			refusal: authRefused,
		},
		{
			name:    "unknown nkey",
			method:  authNKey,
			wrong:   func(t *testing.T, _ testenv.NATSAuth) testenv.NATSAuth { return mustAuth(t, authNKey) },
			refusal: authRefused,
		},
		{
			name:    "credentials of another operator",
			method:  authCreds,
			wrong:   func(t *testing.T, _ testenv.NATSAuth) testenv.NATSAuth { return mustAuth(t, authCreds) },
			refusal: authRefused,
		},
		{
			name:   "client certificate of another authority",
			method: authTLS,
			wrong: func(t *testing.T, right testenv.NATSAuth) testenv.NATSAuth {
				other := mustAuth(t, authTLS)
				other.CAFile = right.CAFile // the relay trusts the server; the server refuses the relay
				return other
			},
			refusal: regexp.MustCompile(`(?i)remote error: tls|tls error`),
		},
		{
			name:   "server certificate of another authority",
			method: authTLS,
			wrong: func(t *testing.T, right testenv.NATSAuth) testenv.NATSAuth {
				other := right
				other.CAFile = mustAuth(t, authTLS).CAFile // the relay does not trust the server
				return other
			},
			refusal: regexp.MustCompile(`(?i)x509`),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			right, err := tc.method.newAuth(env.TempDir(t))
			if err != nil {
				t.Fatalf("make credentials: %v", err)
			}
			wrong := tc.wrong(t, right)
			srv := startAuthNATS(t, right)
			name := testName(t)
			namespaceWithConfigMap(t, name)
			vars := authRelayVars(name, srv, wrong)

			r := startRelay(t, vars)
			// The relay must either exit with an error or keep retrying while it says why; a
			// relay that waits in silence leaves its operator guessing.
			ctx, cancel := context.WithTimeout(context.Background(), refusalDeadline)
			defer cancel()
			_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
				select {
				case <-r.Done():
					return true, nil
				default:
					return tc.refusal.MatchString(r.Output()), nil
				}
			})
			var exited bool
			select {
			case <-r.Done():
				exited = true
			default:
			}
			out := r.Output()
			if !tc.refusal.MatchString(out) {
				state := "still running"
				if exited {
					state = "exited (" + exitStatus(r.Err()) + ")"
				}
				t.Errorf("relay %s after %s without reporting the refusal (want output matching %q):\n%s",
					state, refusalDeadline, tc.refusal, out)
			}
			if exited {
				if r.Err() == nil {
					t.Errorf("relay exit: got status 0, want a failure")
				}
			} else {
				// Retrying is acceptable; it must still stop on SIGTERM.
				if err := r.Signal(syscall.SIGTERM, 15*time.Second); errors.Is(err, child.ErrKilled) {
					t.Errorf("relay still running 15s after SIGTERM")
				} else {
					t.Logf("relay kept retrying; after SIGTERM: %s", exitStatus(r.Err()))
				}
			}
			for _, s := range secretsOf(t, wrong) {
				if strings.Contains(out, s) {
					t.Errorf("relay output contains a secret of the wrong credentials")
				}
			}

			js := authJSClient(t, srv.URL(), right)
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if _, err := js.Stream(sctx, vars["RELAY_STREAM"]); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("stream after refused credentials: got %v, want not found", err)
			}
		})
	}
}

// mustAuth makes material of method in a new directory.
func mustAuth(t *testing.T, m natsAuthMethod) testenv.NATSAuth {
	t.Helper()
	a, err := m.newAuth(env.TempDir(t))
	if err != nil {
		t.Fatalf("make %s credentials: %v", m.name, err)
	}
	return a
}

// exitStatus describes how a process ended.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

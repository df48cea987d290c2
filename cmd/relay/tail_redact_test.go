package main

import (
	"crypto/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// TestTailPrintsNoCredentials runs relay tail with NATS URLs that carry a password or a
// token, in $NATS_URL and in --server, down every path that prints something: --help, flag
// errors, a bad URL, a refused or failed connection and a missing stream. None prints them.
func TestTailPrintsNoCredentials(t *testing.T) {
	password, token := "pw-"+rand.Text(), "tok-"+rand.Text()
	secrets := []string{password, token}
	closed := "127.0.0.1:" + relaytest.FreePort(t)
	// withCreds puts user:password into a nats:// URL of host.
	withCreds := func(host string) string { return "nats://relay:" + password + "@" + host }
	withToken := func(host string) string { return "nats://" + token + "@" + host }
	open := strings.TrimPrefix(env.NATS.URL(), "nats://")
	authSrv := startAuthNATS(t, testenv.UserPasswordAuth("relay", "right-"+rand.Text()))
	authHost := strings.TrimPrefix(authSrv.URL(), "nats://")

	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		// want is what the output must say, credentials redacted.
		want string
	}{
		{name: "help with credentials in NATS_URL", env: map[string]string{"NATS_URL": withCreds("a:4222") + "," + withToken("b:4222")},
			args: []string{"--help"}, code: exitOK, want: "nats://<redacted>@a:4222,nats://<redacted>@b:4222"},
		{name: "unknown flag after --server", args: []string{"--server", withCreds("a:4222"), "--follow"},
			code: exitConfig, want: "--server nats://<redacted>@a:4222 --follow"},
		{name: "URL as the value of a boolean flag", args: []string{"--all=" + withToken("a:4222")},
			code: exitConfig, want: "invalid boolean value"},
		{name: "URL as an argument", args: []string{withCreds("a:4222")},
			code: exitConfig, want: `argument="nats://<redacted>@a:4222"`},
		{name: "bad port in --server", args: []string{"--server", withCreds("a:42x2")},
			code: exitConfig, want: `--server="nats://<redacted>@a:42x2": invalid URL`},
		{name: "bad host in NATS_URL", env: map[string]string{"NATS_URL": withToken("bad host:4222")},
			code: exitConfig, want: `--server="nats://<redacted>@bad host:4222": invalid URL`},
		{name: "nothing listening", args: []string{"--server", withCreds(closed)},
			code: exitFailed, want: "connect to nats nats://<redacted>@" + closed},
		{name: "credentials refused", args: []string{"--server", withCreds(authHost)},
			code: exitFailed, want: "connect to nats nats://<redacted>@" + authHost},
		{name: "token refused", env: map[string]string{"NATS_URL": withToken(authHost)},
			code: exitFailed, want: "connect to nats nats://<redacted>@" + authHost},
		{name: "missing stream", args: []string{"--server", withCreds(open), "--stream", "NO_SUCH_STREAM"},
			code: exitFailed, want: "stream NO_SUCH_STREAM on nats://<redacted>@" + open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := relaytest.Run(t, relayBin, tt.env, append([]string{"tail"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit: got %d, want %d\n%s", code, tt.code, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output: got %q, want it to contain %q", out, tt.want)
			}
			for _, s := range secrets {
				for _, form := range []string{s, url.QueryEscape(s)} {
					if strings.Contains(string(out), form) {
						t.Errorf("output contains a credential:\n%s", out)
					}
				}
			}
		})
	}
}

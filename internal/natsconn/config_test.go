package natsconn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// embedded is a valid configuration of the embedded server without credentials.
var embedded = Config{DataDir: "./relay-data", Listen: "127.0.0.1:4222"}

func TestValidateReportsEveryProblemNamingTheVariable(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "some.pem")
	seed := writeNKeySeed(t, dir)
	missing := filepath.Join(dir, "missing")
	external := func(c Config) Config { c.URL = "nats://a:4222"; return c }

	tests := []struct {
		name string
		cfg  Config
		// want lists the problems as VAR=value, in order; empty: valid.
		want []string
	}{
		{name: "embedded on loopback without credentials", cfg: embedded},
		{name: "embedded, the zero value", cfg: Config{},
			want: []string{"RELAY_NATS_LISTEN=", "RELAY_NATS_DATA_DIR="}},
		{name: "embedded listen without a port", cfg: with(embedded, func(c *Config) { c.Listen = "127.0.0.1" }),
			want: []string{"RELAY_NATS_LISTEN=127.0.0.1"}},
		{name: "embedded listen port out of range", cfg: with(embedded, func(c *Config) { c.Listen = "127.0.0.1:65536" }),
			want: []string{"RELAY_NATS_LISTEN=127.0.0.1:65536"}},
		{name: "external: listen and data dir are not used", cfg: Config{URL: "nats://a:4222"}},
		{name: "external: every client setting", cfg: Config{URL: "nats://a:4222", NKey: seed, TLSCA: file, TLSCert: file, TLSKey: file}},
		{name: "a URL list with blanks", cfg: Config{URL: "nats://a:4222, tls://b:4222"}},
		{name: "empty entry and a repeated URL, then a bad one", cfg: Config{URL: "nats://u:pw@a:4222,,nats://u:pw@a:4222,nats://c:42x2"},
			want: []string{"NATS_URL=nats://<redacted>@a:4222,,nats://<redacted>@a:4222,nats://c:42x2",
				"NATS_URL=nats://<redacted>@a:4222", "NATS_URL=nats://c:42x2"}},
		{name: "port out of range", cfg: Config{URL: "nats://a:0"}, want: []string{"NATS_URL=nats://a:0"}},
		{name: "missing host", cfg: Config{URL: "nats://:4222"}, want: []string{"NATS_URL=nats://:4222"}},
		{name: "unknown scheme", cfg: Config{URL: "http://a:4222"}, want: []string{"NATS_URL=http://a:4222"}},
		{name: "websocket mixed with plain", cfg: Config{URL: "ws://a:80,nats://t@b:4222"},
			want: []string{"NATS_URL=ws://a:80,nats://<redacted>@b:4222"}},
		{name: "user without password", cfg: external(Config{User: "relay"}), want: []string{"RELAY_NATS_USER=relay"}},
		{name: "password without user, redacted", cfg: external(Config{Password: "pw"}), want: []string{"RELAY_NATS_PASSWORD=<redacted>"}},
		{name: "user and password", cfg: external(Config{User: "relay", Password: "pw"})},
		{name: "two methods: the second conflicts with the first",
			cfg:  external(Config{User: "relay", Password: "pw", Token: "tok", NKey: seed}),
			want: []string{"RELAY_NATS_TOKEN=<redacted>", "RELAY_NATS_NKEY=" + seed}},
		{name: "files that cannot be read", cfg: external(Config{Creds: missing, TLSCA: dir, TLSCert: file, TLSKey: missing}),
			want: []string{"RELAY_NATS_CREDS=" + missing, "RELAY_NATS_TLS_CA=" + dir, "RELAY_NATS_TLS_KEY=" + missing}},
		{name: "certificate without key", cfg: external(Config{TLSCert: file}), want: []string{"RELAY_NATS_TLS_CERT=" + file}},
		{name: "key without certificate", cfg: external(Config{TLSKey: file}), want: []string{"RELAY_NATS_TLS_KEY=" + file}},
		{name: "embedded: a credentials file is refused", cfg: with(embedded, func(c *Config) { c.Creds = file }),
			want: []string{"RELAY_NATS_CREDS=" + file}},
		{name: "embedded: client TLS is refused", cfg: with(embedded, func(c *Config) { c.TLSCA, c.TLSCert, c.TLSKey = file, file, file }),
			want: []string{"RELAY_NATS_TLS_CA=" + file, "RELAY_NATS_TLS_CERT=" + file, "RELAY_NATS_TLS_KEY=" + file}},
		{name: "embedded beyond loopback without credentials", cfg: with(embedded, func(c *Config) { c.Listen = "0.0.0.0:4222" }),
			want: []string{"RELAY_NATS_LISTEN=0.0.0.0:4222"}},
		{name: "embedded on every interface without credentials", cfg: with(embedded, func(c *Config) { c.Listen = ":4222" }),
			want: []string{"RELAY_NATS_LISTEN=:4222"}},
		{name: "embedded on IPv6 loopback", cfg: with(embedded, func(c *Config) { c.Listen = "[::1]:4222" })},
		{name: "embedded on localhost", cfg: with(embedded, func(c *Config) { c.Listen = "localhost:4222" })},
		{name: "embedded beyond loopback with a token", cfg: with(embedded, func(c *Config) { c.Listen, c.Token = "0.0.0.0:4222", "tok" })},
		{name: "embedded beyond loopback with an nkey", cfg: with(embedded, func(c *Config) { c.Listen, c.NKey = "0.0.0.0:4222", seed })},
		{name: "embedded beyond loopback: a user without password is no credential",
			cfg:  with(embedded, func(c *Config) { c.Listen, c.User = "0.0.0.0:4222", "relay" }),
			want: []string{"RELAY_NATS_USER=relay", "RELAY_NATS_LISTEN=0.0.0.0:4222"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var got []string
			if err != nil {
				for _, p := range configErrorProblems(t, err) {
					got = append(got, p.Var+"="+p.Value)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems: got %q, want %q (%v)", got, tt.want, err)
			}
		})
	}
}

func TestValidateNeverPrintsPasswordsOrTokens(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "nats://relay:url-secret@a:4222,nats://relay:url-secret@a:4222", Password: "pw-secret"},
		{URL: "nats://a:4222", User: "relay", Password: "pw-secret", Token: "tok-secret"},
		{URL: "ws://url-secret@a:80,nats://b", Token: "tok-secret", NKey: "/no/such/seed"},
	} {
		err := cfg.Validate()
		if err == nil {
			t.Fatalf("Validate(%v): got nil, want problems", cfg)
		}
		for _, secret := range []string{"url-secret", "pw-secret", "tok-secret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Validate(%v): got %q, which contains %s", cfg, err, secret)
			}
		}
	}
}

func TestProblemsSayWhatToDo(t *testing.T) {
	err := with(embedded, func(c *Config) { c.Listen = "0.0.0.0:4222" }).Validate()
	for _, want := range []string{`RELAY_NATS_LISTEN="0.0.0.0:4222"`, "RELAY_NATS_USER", "RELAY_NATS_PASSWORD", "RELAY_NATS_TOKEN", "RELAY_NATS_NKEY", "127.0.0.1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got error %v, want it to mention %s", err, want)
		}
	}
}

func TestCheckURLsNamesTheFlag(t *testing.T) {
	ps := CheckURLs("--server", "nats://u:pw@a:42x2")
	if len(ps) != 1 || ps[0].Var != "--server" || ps[0].Value != "nats://<redacted>@a:42x2" || ps[0].Reason != "invalid URL" {
		t.Errorf("got %+v, want one invalid URL problem of --server, credentials redacted", ps)
	}
}

func TestConfigPrintsNoSecrets(t *testing.T) {
	cfg := Config{User: "relay", Password: "pw-secret", Token: "tok-secret"}
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(s, "pw-secret") || strings.Contains(s, "tok-secret") {
			t.Errorf("printed config %s holds a secret", s)
		}
	}
}

// with returns base changed by f.
func with(base Config, f func(*Config)) Config {
	f(&base)
	return base
}

// configErrorProblems returns the problems of a *ConfigError, failing the test for any other
// error.
func configErrorProblems(t *testing.T, err error) []Problem {
	t.Helper()
	var cerr *ConfigError
	if !errors.As(err, &cerr) {
		t.Fatalf("got error %T %v, want a *ConfigError", err, err)
	}
	return cerr.Problems
}

// writeFile writes a small file into dir and returns its path.
func writeFile(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

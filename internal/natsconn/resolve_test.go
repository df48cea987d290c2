package natsconn

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeContext writes a nats CLI context named name, holding body, under configDir as the
// nats CLI keeps it, and returns the file's path.
func writeContext(t *testing.T, configDir, name, body string) string {
	t.Helper()
	dir := filepath.Join(configDir, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolveTakesEachSettingFromTheStrongestSource(t *testing.T) {
	home := t.TempDir()
	writeContext(t, home, "prod", `{
		"description": "production", "url": "nats://ctx:4222", "user": "ctx-user", "password": "ctx-pw",
		"ca": "/ctx/ca.pem", "cert": "/ctx/cert.pem", "key": "/ctx/key.pem",
		"jetstream_domain": "ctx-domain", "inbox_prefix": "_INBOX_ctx", "color_scheme": "dark"}`)
	writeContext(t, home, "prefixed", `{"url": "nats://ctx:4222", "jetstream_api_prefix": "$JS.hub.API"}`)
	file := filepath.Join(t.TempDir(), "direct.json")
	if err := os.WriteFile(file, []byte(`{"url": "nats://file:4222", "token": "file-tok"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		cfg  Config
		// want is the resolved Config's settings; from, where each came from.
		want Config
		from map[string]string
	}{
		{name: "relay variables alone", cfg: Config{URL: "nats://a:4222", User: "u", Password: "pw", JSDomain: "leaf"},
			want: Config{URL: "nats://a:4222", User: "u", Password: "pw", JSDomain: "leaf"},
			from: map[string]string{"url": "NATS_URL", "user": "RELAY_NATS_USER", "password": "RELAY_NATS_PASSWORD", "js_domain": "RELAY_JS_DOMAIN"}},
		{name: "the nats CLI's variables fill what the relay's leave empty",
			cfg:  Config{URL: "nats://a:4222", User: "u", CLI: CLIVars{User: "cli-user", Password: "cli-pw", CA: "/cli/ca.pem"}},
			want: Config{URL: "nats://a:4222", User: "u", Password: "cli-pw", TLSCA: "/cli/ca.pem"},
			from: map[string]string{"url": "NATS_URL", "user": "RELAY_NATS_USER", "password": "NATS_PASSWORD", "tls_ca": "NATS_CA"}},
		{name: "NATS_USER without a password is a token, as the nats CLI takes it",
			cfg:  Config{URL: "nats://a:4222", CLI: CLIVars{User: "cli-tok"}},
			want: Config{URL: "nats://a:4222", Token: "cli-tok"},
			from: map[string]string{"url": "NATS_URL", "token": "NATS_USER"}},
		{name: "NATS_USER with RELAY_NATS_PASSWORD is a user",
			cfg:  Config{URL: "nats://a:4222", Password: "pw", CLI: CLIVars{User: "cli-user"}},
			want: Config{URL: "nats://a:4222", User: "cli-user", Password: "pw"},
			from: map[string]string{"url": "NATS_URL", "user": "NATS_USER", "password": "RELAY_NATS_PASSWORD"}},
		{name: "NATS_USER with the context's password is a user",
			cfg: Config{CLI: CLIVars{User: "cli-user"}, Context: "prod", ConfigDir: home},
			want: Config{URL: "nats://ctx:4222", User: "cli-user", Password: "ctx-pw", TLSCA: "/ctx/ca.pem", TLSCert: "/ctx/cert.pem",
				TLSKey: "/ctx/key.pem", JSDomain: "ctx-domain", InboxPrefix: "_INBOX_ctx"},
			from: map[string]string{"url": "context prod url", "user": "NATS_USER", "password": "context prod password",
				"tls_ca": "context prod ca", "tls_cert": "context prod cert", "tls_key": "context prod key",
				"js_domain": "context prod jetstream_domain", "inbox_prefix": "context prod inbox_prefix"}},
		{name: "a context fills what no variable sets, by name under the config directory",
			cfg: Config{Token: "", CLI: CLIVars{Password: "cli-pw", Cert: "/cli/cert.pem"}, Context: "prod", ConfigDir: home},
			want: Config{URL: "nats://ctx:4222", User: "ctx-user", Password: "cli-pw", TLSCA: "/ctx/ca.pem", TLSCert: "/cli/cert.pem",
				TLSKey: "/ctx/key.pem", JSDomain: "ctx-domain", InboxPrefix: "_INBOX_ctx"},
			from: map[string]string{"url": "context prod url", "user": "context prod user", "password": "NATS_PASSWORD",
				"tls_ca": "context prod ca", "tls_cert": "NATS_CERT", "tls_key": "context prod key",
				"js_domain": "context prod jetstream_domain", "inbox_prefix": "context prod inbox_prefix"}},
		{name: "NATS_URL wins over the context's url, and the relay's inbox prefix over the context's",
			cfg:  Config{URL: "nats://a:4222", InboxPrefix: "_INBOX_relay", Context: "prod", ConfigDir: home},
			want: Config{URL: "nats://a:4222", User: "ctx-user", Password: "ctx-pw", TLSCA: "/ctx/ca.pem", TLSCert: "/ctx/cert.pem", TLSKey: "/ctx/key.pem", JSDomain: "ctx-domain", InboxPrefix: "_INBOX_relay"},
			from: map[string]string{"url": "NATS_URL", "user": "context prod user", "password": "context prod password",
				"tls_ca": "context prod ca", "tls_cert": "context prod cert", "tls_key": "context prod key",
				"js_domain": "context prod jetstream_domain", "inbox_prefix": "RELAY_NATS_INBOX_PREFIX"}},
		{name: "an API prefix of the relay replaces the context's domain: domain and prefix are one setting",
			cfg:  Config{JSAPIPrefix: "$JS.relay.API", Context: "prod", ConfigDir: home, User: "u", Password: "pw"},
			want: Config{URL: "nats://ctx:4222", User: "u", Password: "pw", TLSCA: "/ctx/ca.pem", TLSCert: "/ctx/cert.pem", TLSKey: "/ctx/key.pem", JSAPIPrefix: "$JS.relay.API", InboxPrefix: "_INBOX_ctx"},
			from: map[string]string{"url": "context prod url", "user": "RELAY_NATS_USER", "password": "RELAY_NATS_PASSWORD",
				"tls_ca": "context prod ca", "tls_cert": "context prod cert", "tls_key": "context prod key",
				"js_api_prefix": "RELAY_JS_API_PREFIX", "inbox_prefix": "context prod inbox_prefix"}},
		{name: "a relay domain replaces the context's API prefix",
			cfg:  Config{JSDomain: "leaf", Context: "prefixed", ConfigDir: home},
			want: Config{URL: "nats://ctx:4222", JSDomain: "leaf"},
			from: map[string]string{"url": "context prefixed url", "js_domain": "RELAY_JS_DOMAIN"}},
		{name: "a context given as the path of a .json file",
			cfg:  Config{Context: file},
			want: Config{URL: "nats://file:4222", Token: "file-tok"},
			from: map[string]string{"url": "context " + file + " url", "token": "context " + file + " token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.Resolve()
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			settings := got
			settings.CLI, settings.Context, settings.ConfigDir, settings.from, settings.resolved = CLIVars{}, "", "", origins{}, false
			if !reflect.DeepEqual(settings, tt.want) {
				t.Errorf("settings: got %#v, want %#v", settings, tt.want)
			}
			if from := got.Origins(); !reflect.DeepEqual(from, tt.from) {
				t.Errorf("origins: got %v, want %v", from, tt.from)
			}
			again, err := got.Resolve()
			if err != nil || again != got {
				t.Errorf("resolving again: got %#v, %v, want it unchanged", again, err)
			}
		})
	}
}

func TestValidateNamesWhereAResolvedSettingCameFrom(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	seed := writeNKeySeed(t, dir)
	writeContext(t, home, "dev", `{"url": "nats://ctx:4222", "user": "ctx-user", "jetstream_domain": "a.b"}`)
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{name: "a user from the context without a password anywhere",
			cfg:  Config{Context: "dev", ConfigDir: home},
			want: []string{"context dev user=ctx-user", "context dev jetstream_domain=a.b"}},
		{name: "a token from NATS_TOKEN conflicts with the context's user, redacted",
			cfg:  Config{CLI: CLIVars{Token: "tok-secret", Password: "pw"}, Context: "dev", ConfigDir: home, JSDomain: "leaf"},
			want: []string{"NATS_TOKEN=<redacted>"}},
		{name: "an nkey from NATS_NKEY conflicts with the relay's user",
			cfg:  Config{URL: "nats://a:4222", User: "u", Password: "pw", CLI: CLIVars{NKey: seed}},
			want: []string{"NATS_NKEY=" + seed}},
		{name: "an unreadable NATS_CREDS", cfg: Config{URL: "nats://a:4222", CLI: CLIVars{Creds: filepath.Join(dir, "missing")}},
			want: []string{"NATS_CREDS=" + filepath.Join(dir, "missing")}},
		{name: "NATS_CERT without a key", cfg: Config{URL: "nats://a:4222", CLI: CLIVars{Cert: seed}},
			want: []string{"NATS_CERT=" + seed}},
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
			if err != nil && strings.Contains(err.Error(), "tok-secret") {
				t.Errorf("problems print the token: %v", err)
			}
		})
	}
}

func TestValidateAcceptsNATSUserAloneAsATokenWithoutPrintingIt(t *testing.T) {
	err := Config{URL: "nats://a:4222", CLI: CLIVars{User: "s3cret-token"}}.Validate()
	if err != nil {
		t.Errorf("Validate: got %v, want nil (NATS_USER alone is a token)", err)
	}
	err = Config{URL: "nats://a:4222", Creds: "/missing.creds", CLI: CLIVars{User: "s3cret-token"}}.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cret-token") || !strings.Contains(err.Error(), "NATS_USER") {
		t.Errorf("beside creds: got %v, want a conflict naming NATS_USER without its value", err)
	}
}

func TestValidateRefusesTheNATSCLIVariablesTheRelayCannotHonour(t *testing.T) {
	err := Config{URL: "nats://a:4222", Token: "tok", CLI: CLIVars{
		JWT: "eyJ-secret", Seed: "SUA-secret", SocksProxy: "socks5://u:px-secret@proxy:1080"}}.Validate()
	var got []string
	if err != nil {
		for _, p := range configErrorProblems(t, err) {
			got = append(got, p.Var+"="+p.Value)
		}
	}
	want := []string{"NATS_JWT=" + Redacted, "NATS_SEED=" + Redacted, "NATS_SOCKS_PROXY=" + Redacted}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems: got %q, want %q (%v)", got, want, err)
	}
	for _, secret := range []string{"eyJ-secret", "SUA-secret", "px-secret"} {
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the problems print a value: %v", err)
		}
	}
}

func TestProblemsNeverHoldAPasswordOrTokenValue(t *testing.T) {
	for _, name := range []string{varPassword, varToken, varCLIPassword, varCLIToken} {
		var ps problems
		ps.add(name, "s3cret", "some reason")
		if ps[0].Value != Redacted {
			t.Errorf("%s: problem value %q, want %q", name, ps[0].Value, Redacted)
		}
	}
}

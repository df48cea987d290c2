package natsconn

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadContextRefusesWhatTheRelayCannotHonour(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name, body string
		// want are parts of the reasons, one problem each, in order.
		want []string
	}{
		{name: "a SOCKS proxy", body: `{"url": "nats://a:4222", "socks_proxy": "socks5://p:1080"}`,
			want: []string{"field socks_proxy is set (a SOCKS proxy)"}},
		{name: "a user JWT and seed", body: `{"user_jwt": "eyJ-secret", "user_seed": "SUA-secret"}`,
			want: []string{"field user_jwt is set (a user JWT)", "field user_seed is set (a user seed)"}},
		{name: "an nsc lookup", body: `{"nsc": "nsc://op/acc/user"}`, want: []string{"field nsc is set (an nsc lookup)"}},
		{name: "TLS first", body: `{"tls_first": true}`, want: []string{"field tls_first is set"}},
		{name: "a Windows certificate store", body: `{"windows_cert_store": "user", "windows_ca_certs_match": ["x"]}`,
			want: []string{"field windows_cert_store is set", "field windows_ca_certs_match is set"}},
		{name: "a password from the environment", body: `{"user": "u", "password": "env://PW"}`,
			want: []string{"field password is a reference (scheme env:)"}},
		{name: "creds from 1Password", body: `{"creds": "op://vault/relay/creds"}`,
			want: []string{"field creds is a reference (scheme op:)"}},
		{name: "creds inlined as a data: URI", body: `{"creds": "data:;base64,SUA-secret"}`,
			want: []string{"field creds is a reference (scheme data:)"}},
		{name: "a scheme in upper case", body: `{"nkey": "FILE:///keys/SUA-secret.nk"}`,
			want: []string{"field nkey is a reference (scheme file:)"}},
		{name: "an unknown field", body: `{"url": "nats://a:4222", "servers": "nats://b:4222"}`,
			want: []string{`not a nats context: json: unknown field "servers"`}},
		{name: "not JSON", body: `url: nats://a:4222`, want: []string{"not a nats context"}},
		{name: "two objects", body: `{} {}`, want: []string{"data after the JSON object"}},
		{name: "a field of the wrong type", body: `{"url": 4222}`, want: []string{"not a nats context"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeContext(t, home, "ctx", tt.body)
			_, err := LoadContext("ctx", home)
			if err == nil {
				t.Fatalf("LoadContext: got nil, want %d problems", len(tt.want))
			}
			ps := configErrorProblems(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems %v, want %d: %q", len(ps), err, len(tt.want), tt.want)
			}
			for i, p := range ps {
				if p.Var != "context ctx" || p.Value != path || !strings.Contains(p.Reason, tt.want[i]) {
					t.Errorf("problem %d: got %s=%q: %s, want context ctx=%q: ...%s...", i, p.Var, p.Value, p.Reason, path, tt.want[i])
				}
			}
			for _, secret := range []string{"eyJ-secret", "SUA-secret", "PW"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the problem prints a value: %v", err)
				}
			}
		})
	}
}

func TestLoadContextFindsTheFileAsTheNATSCLIDoes(t *testing.T) {
	home := t.TempDir()
	path := writeContext(t, home, "dev", `{"url": "nats://a:4222", "creds": "~/relay.creds", "nkey": "$CTX_TEST_DIR/relay.nk",
		"name": "dev", "description": "for people", "color_scheme": "dark", "jetstream_event_prefix": "$JS.dev.EVENT"}`)
	t.Setenv("CTX_TEST_DIR", "/keys")
	userHome, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory to expand ~ to")
	}
	tests := []struct {
		name, ref, configDir string
		wantPath, wantErr    string
	}{
		{name: "a name under the configuration directory", ref: "dev", configDir: home, wantPath: path},
		{name: "the path of a .json file", ref: path, wantPath: path},
		{name: "a missing context", ref: "prod", configDir: home, wantErr: "cannot read the context: no such file or directory"},
		{name: "a name climbing out of the directory", ref: "..dev", configDir: home, wantErr: `must not contain ".."`},
		{name: "a name without a configuration directory", ref: "dev", wantErr: "set XDG_CONFIG_HOME or HOME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadContext(tt.ref, tt.configDir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || configErrorProblems(t, err)[0].Var != "context "+tt.ref {
					t.Fatalf("got %v, want a problem of context %s: ...%s...", err, tt.ref, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Path != tt.wantPath {
				t.Errorf("path: got %s, want %s", c.Path, tt.wantPath)
			}
			if got, want := c.value(settingCreds), filepath.Join(userHome, "relay.creds"); got != want {
				t.Errorf("creds: got %s, want %s (~ expanded)", got, want)
			}
			if got, want := c.value(settingNKey), "/keys/relay.nk"; got != want {
				t.Errorf("nkey: got %s, want %s ($VAR expanded)", got, want)
			}
		})
	}
}

func TestSelectedContextReadsTheNATSCLIsSelection(t *testing.T) {
	home := t.TempDir()
	if got, err := SelectedContext(home); err != nil || got != "" {
		t.Errorf("nothing selected: got %q, %v, want none", got, err)
	}
	writeContext(t, home, "prod", `{}`)
	if err := os.WriteFile(filepath.Join(home, "nats", "context.txt"), []byte("prod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := SelectedContext(home); err != nil || got != "prod" {
		t.Errorf("selected: got %q, %v, want prod", got, err)
	}
}

func TestValidateReportsAnUnusableContextBesideTheOtherProblems(t *testing.T) {
	home := t.TempDir()
	writeContext(t, home, "dev", `{"url": "nats://a:4222", "socks_proxy": "socks5://p:1080"}`)
	err := Config{Context: "dev", ConfigDir: home, URL: "nats://a:4222", JSDomain: "a.b", InboxPrefix: "x.>"}.Validate()
	var got []string
	for _, p := range configErrorProblems(t, err) {
		got = append(got, p.Var)
	}
	if want := []string{"context dev", "RELAY_JS_DOMAIN", "RELAY_NATS_INBOX_PREFIX"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems of: got %q, want %q (%v)", got, want, err)
	}
}

func TestValidateNeverPrintsACredentialReference(t *testing.T) {
	const secret = "U1VBLXNlZWQ"
	tests := []struct {
		name string
		cfg  Config
		// wantVar is the variable the problem names.
		wantVar string
	}{
		{name: "NATS_CREDS inlined as a data: URI", cfg: Config{URL: "nats://a:4222", CLI: CLIVars{Creds: "data:;base64," + secret}},
			wantVar: "NATS_CREDS"},
		{name: "an nkey seed inlined beside a token", cfg: Config{URL: "nats://a:4222", Token: "tok", NKey: "DATA:;base64," + secret},
			wantVar: "RELAY_NATS_NKEY"},
		{name: "creds inlined for the embedded server", cfg: Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Creds: "data:;base64," + secret},
			wantVar: "RELAY_NATS_CREDS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatal("Validate: got nil, want a problem")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the problem prints the credentials: %v", err)
			}
			ps := configErrorProblems(t, err)
			if !slices.ContainsFunc(ps, func(p Problem) bool {
				return p.Var == tt.wantVar && strings.Contains(p.Reason, "scheme data:")
			}) {
				t.Errorf("got %v, want %s refused as a reference (scheme data:)", err, tt.wantVar)
			}
		})
	}
}

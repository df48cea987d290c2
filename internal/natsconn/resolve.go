package natsconn

import "fmt"

// The nats CLI's conventional variables (natscli v0.5.0), each weaker than its RELAY_NATS_*
// counterpart, and the variable naming a nats CLI context.
const (
	varCLIUser     = "NATS_USER"
	varCLIPassword = "NATS_PASSWORD"
	varCLIToken    = "NATS_TOKEN"
	varCLICreds    = "NATS_CREDS"
	varCLINKey     = "NATS_NKEY"
	varCLICA       = "NATS_CA"
	varCLICert     = "NATS_CERT"
	varCLIKey      = "NATS_KEY"
	varContext     = "NATS_CONTEXT"

	// The nats CLI's variables of what the relay cannot honour: Validate refuses them.
	varCLIJWT        = "NATS_JWT"
	varCLISeed       = "NATS_SEED"
	varCLISocksProxy = "NATS_SOCKS_PROXY"
)

// The relay's variables of the settings that only it (or a context) sets.
const (
	varJSDomain    = "RELAY_JS_DOMAIN"
	varJSAPIPrefix = "RELAY_JS_API_PREFIX"
	varInboxPrefix = "RELAY_NATS_INBOX_PREFIX"
)

// CLIVars are the nats CLI's conventional variables. Each applies only where the relay's
// own variable for the same setting is empty.
type CLIVars struct {
	// User and Password are NATS_USER and NATS_PASSWORD.
	User     string
	Password Secret
	// Token is NATS_TOKEN.
	Token Secret
	// Creds and NKey are NATS_CREDS and NATS_NKEY.
	Creds, NKey string
	// CA, Cert and Key are NATS_CA, NATS_CERT and NATS_KEY.
	CA, Cert, Key string

	// JWT, Seed and SocksProxy are NATS_JWT, NATS_SEED and NATS_SOCKS_PROXY, which the relay
	// cannot honour: Validate refuses them rather than connect otherwise than the nats CLI.
	JWT        string
	Seed       Secret
	SocksProxy string
}

// unsupported reports each of v's variables the relay cannot honour, without its value.
func (v CLIVars) unsupported(ps *problems) {
	for _, u := range []struct{ name, value, what string }{
		{varCLIJWT, v.JWT, "a user JWT"},
		{varCLISeed, string(v.Seed), "a user seed"},
		{varCLISocksProxy, v.SocksProxy, "a SOCKS proxy"},
	} {
		if u.value != "" {
			ps.add(u.name, Redacted, u.what+", which the relay cannot use: unset it (the relay takes creds, nkey, user and password, or token, and connects directly)")
		}
	}
}

// setting is one NATS setting that may come from several places.
type setting int

const (
	settingURL setting = iota
	settingUser
	settingPassword
	settingToken
	settingCreds
	settingNKey
	settingTLSCA
	settingTLSCert
	settingTLSKey
	settingJSDomain
	settingJSAPIPrefix
	settingInboxPrefix
	numSettings
)

// settingInfo describes a setting: its key in the startup log, the relay's variable, the nats
// CLI's variable (if any) and the context field.
var settingInfo = [numSettings]struct{ key, relayVar, cliVar, field string }{
	settingURL:         {"url", varURL, "", "url"},
	settingUser:        {"user", varUser, varCLIUser, "user"},
	settingPassword:    {"password", varPassword, varCLIPassword, "password"},
	settingToken:       {"token", varToken, varCLIToken, "token"},
	settingCreds:       {"creds", varCreds, varCLICreds, "creds"},
	settingNKey:        {"nkey", varNKey, varCLINKey, "nkey"},
	settingTLSCA:       {"tls_ca", varTLSCA, varCLICA, "ca"},
	settingTLSCert:     {"tls_cert", varTLSCert, varCLICert, "cert"},
	settingTLSKey:      {"tls_key", varTLSKey, varCLIKey, "key"},
	settingJSDomain:    {"js_domain", varJSDomain, "", "jetstream_domain"},
	settingJSAPIPrefix: {"js_api_prefix", varJSAPIPrefix, "", "jetstream_api_prefix"},
	settingInboxPrefix: {"inbox_prefix", varInboxPrefix, "", "inbox_prefix"},
}

// origins names, per setting, where a resolved Config took it from; empty means the relay's
// own variable (or nothing).
type origins [numSettings]string

// name returns where s came from: the relay's variable unless resolution took it elsewhere.
func (c Config) name(s setting) string {
	if o := c.from[s]; o != "" {
		return o
	}
	return settingInfo[s].relayVar
}

// anyName lists every variable that sets s, for messages about a missing setting.
func anyName(s setting) string {
	names := settingInfo[s].relayVar
	if v := settingInfo[s].cliVar; v != "" {
		names += " or " + v
	}
	return names + " (or the context's " + settingInfo[s].field + ")"
}

// field returns a pointer to c's value of s.
func (c *Config) field(s setting) *string {
	switch s {
	case settingURL:
		return &c.URL
	case settingUser:
		return &c.User
	case settingPassword:
		return (*string)(&c.Password)
	case settingToken:
		return (*string)(&c.Token)
	case settingCreds:
		return &c.Creds
	case settingNKey:
		return &c.NKey
	case settingTLSCA:
		return &c.TLSCA
	case settingTLSCert:
		return &c.TLSCert
	case settingTLSKey:
		return &c.TLSKey
	case settingJSDomain:
		return &c.JSDomain
	case settingJSAPIPrefix:
		return &c.JSAPIPrefix
	case settingInboxPrefix:
		return &c.InboxPrefix
	}
	panic(fmt.Sprintf("natsconn: unknown setting %d", s))
}

// value returns the nats CLI variable's value of s ("" for a setting it has none for).
func (v CLIVars) value(s setting) string {
	switch s {
	case settingUser:
		return v.User
	case settingPassword:
		return string(v.Password)
	case settingToken:
		return string(v.Token)
	case settingCreds:
		return v.Creds
	case settingNKey:
		return v.NKey
	case settingTLSCA:
		return v.CA
	case settingTLSCert:
		return v.Cert
	case settingTLSKey:
		return v.Key
	}
	return ""
}

// Resolve returns c with every setting resolved, strongest first: the relay's variables
// (NATS_URL, RELAY_NATS_*, RELAY_JS_*), then the nats CLI's variables (CLI), then the context
// (Context), each setting on its own. NATS_USER with no password from anywhere is a token, as
// the nats CLI takes it. The JetStream domain and API prefix count as one setting: when the
// relay's variables set either, the context's are not used. A context that cannot be read,
// or that sets what the relay cannot honour, is a *ConfigError naming it. Resolving a
// resolved Config returns it unchanged.
func (c Config) Resolve() (Config, error) {
	if c.resolved {
		return c, nil
	}
	var cx Context
	if c.Context != "" {
		var err error
		if cx, err = LoadContext(c.Context, c.ConfigDir); err != nil {
			return Config{}, err
		}
	}
	r := c
	r.resolved = true
	cli, tokenVar := c.CLI, varCLIToken
	if cli.User != "" && cli.Password == "" && c.Password == "" && cx.value(settingPassword) == "" {
		// The nats CLI takes NATS_USER without a password as a token (its --user is
		// "Username or Token"), so a shell set up that way logs in the same.
		cli.Token, cli.User, tokenVar = Secret(cli.User), "", varCLIUser
	}
	for s := range numSettings {
		if *r.field(s) == "" && cli.value(s) != "" {
			*r.field(s) = cli.value(s)
			r.from[s] = settingInfo[s].cliVar
			if s == settingToken {
				r.from[s] = tokenVar
			}
		}
	}
	if c.Context == "" {
		return r, nil
	}
	for s := range numSettings {
		if s == settingJSDomain || s == settingJSAPIPrefix {
			if c.JSDomain != "" || c.JSAPIPrefix != "" {
				continue
			}
		}
		if v := cx.value(s); *r.field(s) == "" && v != "" {
			*r.field(s) = v
			r.from[s] = cx.Label() + " " + settingInfo[s].field
		}
	}
	return r, nil
}

// Origins returns, for each setting that is set, where it came from: a variable, or a
// context and its field. It holds names only, never values, and is meant for the startup log.
// c should be resolved (Resolve).
func (c Config) Origins() map[string]string {
	out := make(map[string]string)
	for s := range numSettings {
		if *c.field(s) != "" {
			out[settingInfo[s].key] = c.name(s)
		}
	}
	return out
}

package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
)

// NATS returns the NATS connection settings, shared by the relay and relay tail, before
// resolution: natsconn.Config.Resolve applies, per setting, NATS_URL, RELAY_NATS_* and
// RELAY_JS_* first, then the nats CLI's NATS_* variables, then the NATS_CONTEXT context.
func (c Config) NATS() natsconn.Config {
	return natsconn.Config{
		URL:         c.NATSURL.Raw,
		DataDir:     c.NATSDataDir,
		Listen:      c.NATSListen,
		User:        c.NATSUser,
		Password:    c.NATSPassword,
		Token:       c.NATSToken,
		Creds:       c.NATSCreds,
		NKey:        c.NATSNKey,
		TLSCA:       c.NATSTLSCA,
		TLSCert:     c.NATSTLSCert,
		TLSKey:      c.NATSTLSKey,
		JSDomain:    c.JSDomain,
		JSAPIPrefix: c.JSAPIPrefix,
		InboxPrefix: c.NATSInboxPrefix,
		CLI: natsconn.CLIVars{
			User: c.CLIUser, Password: c.CLIPassword, Token: c.CLIToken, Creds: c.CLICreds, NKey: c.CLINKey,
			CA: c.CLICA, Cert: c.CLICert, Key: c.CLIKey,
			JWT: c.CLIJWT, Seed: c.CLISeed, SocksProxy: c.CLISocksProxy,
		},
		Context:   c.NATSContext,
		ConfigDir: natsConfigDir(),
	}
}

// natsConfigDir is where the nats CLI keeps its contexts: $XDG_CONFIG_HOME, else ~/.config
// (os.UserConfigDir's rule on Linux, and natscontext's everywhere); "" when neither is known.
func natsConfigDir() string {
	if dir := os.Getenv("XDG_CONFIG_HOME"); dir != "" {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config")
}

// connectNATS is natsconn.Connect with cfg's settings; an unusable setting comes back as a
// *ConfigError (exit status 2).
func connectNATS(ctx context.Context, cfg Config, lost context.CancelCauseFunc) (*natsconn.Conn, error) {
	return natsconn.Connect(ctx, cfg.NATS(), lost)
}

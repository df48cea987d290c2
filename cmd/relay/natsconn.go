package main

import (
	"context"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natsconn"
)

// NATS returns the NATS connection settings, shared by the relay and relay tail.
func (c Config) NATS() natsconn.Config {
	return natsconn.Config{
		URL:      c.NATSURL.Raw,
		DataDir:  c.NATSDataDir,
		Listen:   c.NATSListen,
		User:     c.NATSUser,
		Password: c.NATSPassword,
		Token:    c.NATSToken,
		Creds:    c.NATSCreds,
		NKey:     c.NATSNKey,
		TLSCA:    c.NATSTLSCA,
		TLSCert:  c.NATSTLSCert,
		TLSKey:   c.NATSTLSKey,
	}
}

// connectNATS is natsconn.Connect with cfg's settings; an unusable setting comes back as a
// *ConfigError (exit status 2).
func connectNATS(ctx context.Context, cfg Config, lost context.CancelCauseFunc) (*natsconn.Conn, error) {
	return natsconn.Connect(ctx, cfg.NATS(), lost)
}

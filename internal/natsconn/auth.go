package natsconn

import "github.com/nats-io/nats.go"

// AuthOptions returns the nats.Options that present c's credentials and client TLS. A seed
// file that is no NKey seed is a *ConfigError naming where it came from. c should be resolved
// (Resolve).
func (c Config) AuthOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, string(c.Password)))
	case c.Token != "":
		opts = append(opts, nats.Token(string(c.Token)))
	case c.Creds != "":
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, &ConfigError{Problems: []Problem{{Var: c.name(settingNKey), Value: c.NKey, Reason: err.Error()}}}
		}
		opts = append(opts, opt)
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

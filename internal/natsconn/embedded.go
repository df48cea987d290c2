package natsconn

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// The embedded nats-server (NATS_URL empty) holds everything a relay writes: the events, the
// checkpoints and the object index. A client that can reach it unauthenticated can read every
// event, publish forged ones, move checkpoints and purge index keys, so that later relists
// miss deletes. Hence:
//   - configured credentials are required by the embedded server itself, not only presented
//     by the relay's client: user and password, token, or the public key of the NKey seed;
//   - credentials it cannot verify on its own are refused: a JWT credentials file needs the
//     operator and account JWTs that issued it;
//   - the RELAY_NATS_TLS_* files are the relay's client side of TLS to an external NATS; the
//     embedded server serves no TLS, so they are refused rather than silently meaningless;
//   - it listens beyond loopback only when it requires credentials.

// embeddedReadyTimeout bounds the embedded server's start, JetStream recovery included.
const embeddedReadyTimeout = 30 * time.Second

// embeddedAuthVars names the variables that make the embedded server require credentials,
// for messages that say how to add authentication.
const embeddedAuthVars = "RELAY_NATS_USER and RELAY_NATS_PASSWORD, RELAY_NATS_TOKEN or RELAY_NATS_NKEY"

// validateEmbedded reports settings the embedded nats-server cannot honour, and a listen
// address beyond loopback without credentials. It checks nothing when URL is set.
func (c Config) validateEmbedded(ps *problems) {
	if !c.Embedded() {
		return
	}
	if c.Creds != "" {
		ps.add(c.name(settingCreds), c.shown(settingCreds), "the embedded nats-server (NATS_URL empty) cannot verify a JWT credentials file "+
			"without the operator and account that issued it: use "+embeddedAuthVars+", or set NATS_URL")
	}
	for _, v := range []struct{ name, value string }{
		{c.name(settingTLSCA), c.TLSCA},
		{c.name(settingTLSCert), c.TLSCert},
		{c.name(settingTLSKey), c.TLSKey},
	} {
		if v.value != "" {
			ps.add(v.name, v.value, "client TLS to an external NATS: the embedded nats-server (NATS_URL empty) serves no TLS; "+
				"unset it, or run a nats-server with TLS and set NATS_URL")
		}
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return // reported by Validate
	}
	if !isLoopbackHost(host) && !c.embeddedCredentials() {
		ps.add(varListen, c.Listen, "the embedded nats-server would accept clients beyond loopback "+
			"without authentication, and any of them could read every event, publish forged ones and overwrite checkpoints: "+
			"set "+embeddedAuthVars+" (the embedded server then requires them), or listen on 127.0.0.1")
	}
}

// isLoopbackHost reports whether a listen host accepts only local clients: a loopback IP or
// "localhost". An empty host listens on every interface.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// embeddedCredentials reports whether c carries credentials the embedded server can require.
func (c Config) embeddedCredentials() bool {
	return c.User != "" && c.Password != "" || c.Token != "" || c.NKey != ""
}

// embeddedMethod names what the embedded server requires from clients, for the log.
func (c Config) embeddedMethod() string {
	switch {
	case c.User != "":
		return "user and password"
	case c.Token != "":
		return "token"
	case c.NKey != "":
		return "nkey"
	}
	return "none (loopback only)"
}

// requireOn makes the embedded server's options require c's credentials from every client,
// the relay's own included. Without credentials it leaves opts open (validateEmbedded allows
// that on loopback only).
func (c Config) requireOn(opts *server.Options) error {
	switch {
	case c.User != "":
		opts.Username, opts.Password = c.User, string(c.Password)
	case c.Token != "":
		opts.Authorization = string(c.Token)
	case c.NKey != "":
		pub, err := nkeyPublicUserKey(c.NKey)
		if err != nil {
			return &ConfigError{Problems: []Problem{{Var: c.name(settingNKey), Value: c.NKey, Reason: err.Error()}}}
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	return nil
}

// nkeyPublicUserKey reads a user NKey seed file (plain or decorated, as nats.go reads it) and
// returns its public key; the seed is wiped from memory.
func nkeyPublicUserKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read nkey seed: %w", err)
	}
	defer clear(b)
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return "", fmt.Errorf("not an nkey seed: %w", err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("nkey public key: %w", err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", errors.New("not a user nkey seed (want one starting with SU)")
	}
	return pub, nil
}

// startEmbedded starts the embedded nats-server on c.Listen with JetStream in c.DataDir (in
// c.JSDomain when set),
// requiring c's credentials from every client. c must be valid (Validate).
func startEmbedded(c Config) (*server.Server, error) {
	host, portStr, _ := net.SplitHostPort(c.Listen) // validated in Config
	port, _ := strconv.Atoi(portStr)
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: "kube-nats-relay-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		// A relay given a domain finds its stream there, as on a leaf node of that domain.
		JetStreamDomain: c.JSDomain,
		NoSigs:          true,
		NoLog:           true,
	}
	if err := c.requireOn(opts); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(embeddedReadyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats-server on %s with storage in %s: not ready after %s", c.Listen, dir, embeddedReadyTimeout)
	}
	return s, nil
}

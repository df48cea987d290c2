package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

const (
	// embeddedReadyTimeout bounds the embedded server's start, JetStream recovery included.
	embeddedReadyTimeout = 30 * time.Second
	// reconnectWait is the pause between reconnect attempts; reconnects never stop.
	reconnectWait = time.Second
	// reconnectBufSize buffers publishes made while disconnected (nats.go's default is 8 MiB);
	// publishes beyond it fail and are retried by the pipeline.
	reconnectBufSize = 32 << 20
	// pingInterval and maxPingsOutstanding detect a server that died without closing the
	// connection within about 30s (the client's defaults take minutes, during which every
	// publish times out and readiness would stay green).
	pingInterval        = 10 * time.Second
	maxPingsOutstanding = 3
	// drainTimeout bounds the final drain at shutdown; the pipeline has already waited for
	// its acks, so there is little left to flush.
	drainTimeout = time.Second
)

// natsConn is the relay's NATS connection and, without NATS_URL, the embedded server.
type natsConn struct {
	nc       *nats.Conn
	embedded *server.Server
	// closing is set before the relay closes the connection itself.
	closing atomic.Bool
	// dialer made the connection's sockets; abort resets the last one.
	dialer *resettableDialer
}

// resettableDialer dials like nats.go's default dialer and remembers the last socket, so
// that abort can reset it: a plain close lets the kernel go on sending what the socket still
// buffers, for minutes across a partition, after the relay has stopped.
type resettableDialer struct {
	d    net.Dialer
	last atomic.Pointer[net.TCPConn]
}

func (r *resettableDialer) Dial(network, address string) (net.Conn, error) {
	c, err := r.d.Dial(network, address)
	if tc, ok := c.(*net.TCPConn); ok {
		r.last.Store(tc)
	}
	return c, err
}

// reset makes closing the last socket discard what it has not sent (SO_LINGER 0).
func (r *resettableDialer) reset() {
	if tc := r.last.Load(); tc != nil {
		_ = tc.SetLinger(0)
	}
}

// errNATSClosed is the cause given to lost when the NATS client gives up for good (for
// example its credentials were refused on two attempts in a row); the relay then exits.
var errNATSClosed = errors.New("nats connection closed")

// connectStatusEvery is how often a failing first connection is reported while retrying.
const connectStatusEvery = 10 * time.Second

// connectNATS connects (starting the embedded server first without NATS_URL) and waits for
// the first connection. A connection the client gives up on, then or later, cancels lost
// with errNATSClosed and the client's last error.
func connectNATS(ctx context.Context, cfg Config, lost context.CancelCauseFunc) (*natsConn, error) {
	log := zerolog.Ctx(ctx)
	c := &natsConn{dialer: &resettableDialer{d: net.Dialer{Timeout: nats.DefaultTimeout}}}
	urls := strings.Join(cfg.NATSURLs(), ",")
	if cfg.EmbeddedNATS() {
		s, err := startEmbedded(cfg)
		if err != nil {
			return nil, err
		}
		c.embedded = s
		urls = s.ClientURL()
		log.Info().Str("url", urls).Str("store_dir", cfg.NATSDataDir).Str("auth", cfg.natsAuth().embeddedMethod()).
			Msg("embedded nats-server started")
	}
	opts := []nats.Option{
		nats.Name("kube-nats-relay"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectBufSize(reconnectBufSize),
		nats.RetryOnFailedConnect(true),
		nats.DrainTimeout(drainTimeout),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOutstanding),
		nats.SetCustomDialer(c.dialer),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil { // nil when we close the connection ourselves
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn().Err(err).Str("url", redactURL(urls)).Msg("nats connect failed, retrying")
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if c.closing.Load() {
				return
			}
			err := nc.LastError()
			if err == nil {
				err = errors.New("closed by the client")
			}
			log.Error().Err(err).Msg("nats connection closed for good")
			lost(fmt.Errorf("%w: %w", errNATSClosed, err))
		}),
	}
	auth, err := cfg.natsAuth().options()
	if err != nil {
		c.close(ctx)
		return nil, err
	}
	opts = append(opts, auth...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		c.close(ctx)
		return nil, fmt.Errorf("connect to nats %s: %w", redactURL(urls), err)
	}
	c.nc = nc
	// With RetryOnFailedConnect the first connection may still be pending; wait for it so
	// that the stream and bucket can be set up, saying why while it fails.
	lastReport := time.Now()
	for !nc.IsConnected() {
		if nc.IsClosed() {
			err := nc.LastError()
			c.close(ctx)
			return nil, fmt.Errorf("connect to nats %s: %w", redactURL(urls), err)
		}
		if time.Since(lastReport) >= connectStatusEvery {
			log.Warn().Err(nc.LastError()).Str("url", redactURL(urls)).Msg("still not connected to nats")
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			c.close(ctx)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	log.Info().Str("url", nc.ConnectedUrlRedacted()).Int64("max_payload", nc.MaxPayload()).Msg("nats connected")
	return c, nil
}

// natsAuth is the NATS authentication shared by the relay and relay tail, from the
// RELAY_NATS_* variables.
type natsAuth struct {
	User                   string
	Password, Token        Secret
	Creds, NKey            string
	TLSCA, TLSCert, TLSKey string
}

func (c Config) natsAuth() natsAuth {
	return natsAuth{User: c.NATSUser, Password: c.NATSPassword, Token: c.NATSToken, Creds: c.NATSCreds,
		NKey: c.NATSNKey, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey}
}

// options returns the nats.Options for the configured authentication and TLS.
func (a natsAuth) options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, string(a.Password)))
	case a.Token != "":
		opts = append(opts, nats.Token(string(a.Token)))
	case a.Creds != "":
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, &ConfigError{Problems: []Problem{{Var: "RELAY_NATS_NKEY", Value: a.NKey, Reason: err.Error()}}}
		}
		opts = append(opts, opt)
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSCert != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	return opts, nil
}

// startEmbedded starts the embedded nats-server on RELAY_NATS_LISTEN with JetStream, requiring
// the relay's configured credentials from every client (see validateEmbedded).
func startEmbedded(cfg Config) (*server.Server, error) {
	host, portStr, _ := net.SplitHostPort(cfg.NATSListen) // validated in Config
	port, _ := strconv.Atoi(portStr)
	dir, err := filepath.Abs(cfg.NATSDataDir)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: "kube-nats-relay-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
	}
	if err := cfg.natsAuth().requireOn(opts); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(embeddedReadyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats-server on %s with storage in %s: not ready after %s", cfg.NATSListen, dir, embeddedReadyTimeout)
	}
	return s, nil
}

// close drains the connection (flushing what is buffered) and stops the embedded server.
func (c *natsConn) close(ctx context.Context) {
	c.closing.Store(true)
	if c.nc != nil {
		if err := c.nc.Drain(); err != nil {
			c.nc.Close()
		}
		for !c.nc.IsClosed() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if c.embedded != nil {
		c.embedded.Shutdown()
		c.embedded.WaitForShutdown()
		zerolog.Ctx(ctx).Info().Msg("embedded nats-server stopped")
	}
}

// abort closes the connection at once, without draining: nothing handed to the client after
// it reaches the server, what the client buffered while disconnected is dropped, and the
// socket is reset rather than closed, so the kernel does not deliver what it still holds
// later either. It is the hard stop of a leader that lost its lease; close may still be
// called afterwards.
func (c *natsConn) abort() {
	c.closing.Store(true)
	if c.dialer != nil {
		c.dialer.reset()
	}
	if c.nc != nil {
		c.nc.Close()
	}
}

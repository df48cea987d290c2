package natsconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

const (
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
	// connectStatusEvery is how often a failing first connection is reported while retrying.
	connectStatusEvery = 10 * time.Second
	// clientName is how the relay's connection shows in the server's monitoring.
	clientName = "kube-nats-relay"
)

// ErrClosed is the cause given to Connect's lost when the NATS client gives up for good (for
// example its credentials were refused on two attempts in a row); the relay then exits.
var ErrClosed = errors.New("nats connection closed")

// Conn is the relay's NATS connection and, without a URL, the embedded server.
type Conn struct {
	nc       *nats.Conn
	embedded *server.Server
	// closing is set before the relay closes the connection itself.
	closing atomic.Bool
	// dialer made the connection's sockets; Abort resets the last one.
	dialer *resettableDialer
}

var _ nats.CustomDialer = (*resettableDialer)(nil)

// resettableDialer dials like nats.go's default dialer and remembers the last socket, so
// that Abort can reset it: a plain close lets the kernel go on sending what the socket still
// buffers, for minutes across a partition, after the relay has stopped.
type resettableDialer struct {
	d    net.Dialer
	last atomic.Pointer[net.TCPConn]
}

// Dial implements nats.CustomDialer.
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

// Connect resolves cfg (Resolve), logs where each setting came from (names only), connects
// (starting the embedded server first when cfg has no URL) and waits for
// the first connection, retrying until ctx ends. A connection the client gives up on, then
// or later, calls lost once with ErrClosed wrapping the client's last error; a close asked
// for with Close or Abort does not. cfg must be valid (Validate); a seed file that is no NKey
// seed comes back as a *ConfigError.
func Connect(ctx context.Context, cfg Config, lost func(cause error)) (*Conn, error) {
	log := zerolog.Ctx(ctx)
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	origins := zerolog.Dict()
	for key, from := range cfg.Origins() {
		origins.Str(key, from)
	}
	log.Info().Dict("from", origins).Msg("nats settings")
	c := &Conn{dialer: &resettableDialer{d: net.Dialer{Timeout: nats.DefaultTimeout}}}
	urls := strings.Join(cfg.URLs(), ",")
	// The client reports its end on a goroutine of its own, which may run before or after
	// Connect sees the connection closed: report it once, whichever comes first.
	var lostOnce sync.Once
	giveUp := func(err error) {
		if err == nil {
			err = errors.New("closed by the client")
		}
		lostOnce.Do(func() {
			log.Error().Err(err).Msg("nats connection closed for good")
			lost(fmt.Errorf("%w: %w", ErrClosed, err))
		})
	}
	if cfg.Embedded() {
		s, err := startEmbedded(cfg)
		if err != nil {
			return nil, err
		}
		c.embedded = s
		urls = s.ClientURL()
		log.Info().Str("url", urls).Str("store_dir", cfg.DataDir).Str("auth", cfg.embeddedMethod()).
			Msg("embedded nats-server started")
	}
	opts := []nats.Option{
		nats.Name(clientName),
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
			log.Warn().Err(err).Str("url", RedactURL(urls)).Msg("nats connect failed, retrying")
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if c.closing.Load() {
				return
			}
			giveUp(nc.LastError())
		}),
	}
	auth, err := cfg.AuthOptions()
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	opts = append(opts, auth...)
	opts = append(opts, cfg.clientOptions()...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("connect to nats %s: %w", RedactURL(urls), err)
	}
	c.nc = nc
	// With RetryOnFailedConnect the first connection may still be pending; wait for it so
	// that the stream and bucket can be set up, saying why while it fails.
	lastReport := time.Now()
	for !nc.IsConnected() {
		if nc.IsClosed() {
			err := nc.LastError()
			giveUp(err)
			c.Close(ctx)
			return nil, fmt.Errorf("connect to nats %s: %w", RedactURL(urls), err)
		}
		if time.Since(lastReport) >= connectStatusEvery {
			log.Warn().Err(nc.LastError()).Str("url", RedactURL(urls)).Msg("still not connected to nats")
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			c.Close(ctx)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	log.Info().Str("url", nc.ConnectedUrlRedacted()).Int64("max_payload", nc.MaxPayload()).Msg("nats connected")
	return c, nil
}

// NATS returns the client connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// Close drains the connection (flushing what is buffered) and stops the embedded server.
// It may follow Abort.
func (c *Conn) Close(ctx context.Context) {
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

// Abort closes the connection at once, without draining: nothing handed to the client after
// it reaches the server, what the client buffered while disconnected is dropped, and the
// socket is reset rather than closed, so the kernel does not deliver what it still holds
// later either. It is the hard stop of a leader that lost its lease, safe to call from any
// goroutine and more than once, and shaped to be passed as a func(); Close may still be
// called afterwards (and stops the embedded server).
func (c *Conn) Abort() {
	c.closing.Store(true)
	if c.dialer != nil {
		c.dialer.reset()
	}
	if c.nc != nil {
		c.nc.Close()
	}
}

// Dial connects a short-lived client such as relay tail, named name, with cfg's URL,
// credentials and inbox prefix (resolved first, see Resolve). Unlike Connect it does not wait for a server that is not there (timeout
// bounds the first attempt) and starts no embedded server; once connected it reconnects for
// as long as it runs. Its error quotes no credentials.
func Dial(cfg Config, name string, timeout time.Duration) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
	}
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	auth, err := cfg.AuthOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth...)
	opts = append(opts, cfg.clientOptions()...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		// Not wrapped: nats.go's errors may quote the URL, credentials included.
		return nil, fmt.Errorf("connect to nats %s: %s", RedactURL(cfg.URL), RedactUserinfo(err.Error(), cfg.URL))
	}
	return nc, nil
}

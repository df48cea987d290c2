package natsconn

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kube-nats-relay/kube-nats-relay/internal/natstest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/relaytest"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

const (
	// dialTimeout bounds a dial of an in-process nats-server, ready when dialled.
	dialTimeout = 10 * time.Second
	// connectTestTimeout bounds a Connect that would otherwise retry for ever.
	connectTestTimeout = 30 * time.Second
)

func TestResettableDialerResetsInsteadOfClosing(t *testing.T) {
	tests := []struct {
		name    string
		reset   bool
		wantErr error
	}{
		{"close: the peer reads EOF after what was sent", false, io.EOF},
		{"reset: the peer's read fails with a reset", true, syscall.ECONNRESET},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := l.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			d := &resettableDialer{d: net.Dialer{Timeout: time.Second}}
			c, err := d.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			peer := <-accepted
			defer peer.Close()
			if tt.reset {
				d.reset()
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = peer.Read(make([]byte, 1))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("peer read: got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// authKind makes a server demand one kind of authentication, and the client Config that
// passes it.
type authKind struct {
	name string
	make func(dir string) (testenv.NATSAuth, error)
}

var authKinds = []authKind{
	{"user and password", func(string) (testenv.NATSAuth, error) { return testenv.UserPasswordAuth("relay", "pw"), nil }},
	{"token", func(string) (testenv.NATSAuth, error) { return testenv.TokenAuth("tok"), nil }},
	{"nkey seed file", testenv.NewNKeyAuth},
	{"credentials file", testenv.NewCredsAuth},
	{"tls client certificate", testenv.NewTLSAuth},
}

// clientConfig is the Config that presents a's client material to url.
func clientConfig(url string, a testenv.NATSAuth) Config {
	return Config{URL: url, User: a.User, Password: Secret(a.Password), Token: Secret(a.Token), Creds: a.CredsFile,
		NKey: a.NKeySeedFile, TLSCA: a.CAFile, TLSCert: a.CertFile, TLSKey: a.KeyFile}
}

func TestDialPresentsEachKindOfCredentials(t *testing.T) {
	for _, k := range authKinds {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			auth, err := k.make(dir)
			if err != nil {
				t.Fatal(err)
			}
			s := natstest.Start(t, natstest.ParseConfig(t, auth.ServerConfig))
			cfg := clientConfig(s.ClientURL(), auth)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			nc, err := Dial(cfg, "natsconn-test", dialTimeout)
			if err != nil {
				t.Fatalf("Dial with the server's credentials: %v", err)
			}
			defer nc.Close()
			if _, err := nc.RTT(); err != nil {
				t.Errorf("round trip: %v", err)
			}
			if nc, err := Dial(Config{URL: s.ClientURL()}, "natsconn-test", dialTimeout); err == nil {
				nc.Close()
				t.Errorf("Dial without credentials: got a connection, want it refused")
			}
		})
	}
}

func TestDialErrorQuotesNoCredentials(t *testing.T) {
	s := natstest.Start(t, natstest.ParseConfig(t, testenv.TokenAuth("right-token").ServerConfig))
	host := strings.TrimPrefix(s.ClientURL(), "nats://")
	for _, url := range []string{"nats://relay:pw-secret@" + host, "nats://tok-secret@" + host, "nats://relay:pw-secret@127.0.0.1:" + relaytest.FreePort(t)} {
		_, err := Dial(Config{URL: url}, "natsconn-test", dialTimeout)
		if err == nil {
			t.Fatalf("Dial %s: got a connection, want an error", RedactURL(url))
		}
		if msg := err.Error(); !strings.Contains(msg, "connect to nats "+RedactURL(url)) || strings.Contains(msg, "secret") {
			t.Errorf("Dial %s: got %q, want it to name the URL with its credentials redacted", RedactURL(url), msg)
		}
	}
}

func TestConnectedEmbeddedServerRequiresTheConfiguredCredentials(t *testing.T) {
	seed := writeNKeySeed(t, t.TempDir())
	tests := []struct {
		name string
		with func(*Config)
		// open says whether a client without credentials is accepted.
		open bool
	}{
		{name: "none, on loopback", with: func(*Config) {}, open: true},
		{name: "user and password", with: func(c *Config) { c.User, c.Password = "relay", "pw" }},
		{name: "token", with: func(c *Config) { c.Token = "tok" }},
		{name: "nkey", with: func(c *Config) { c.NKey = seed }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := relaytest.FreePort(t)
			cfg := with(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:" + port}, tt.with)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			// A client the server does not answer as configured retries for ever: bound it.
			ctx, cancel := context.WithTimeout(context.Background(), connectTestTimeout)
			defer cancel()
			conn, err := Connect(ctx, cfg, func(cause error) { t.Errorf("lost: %v", cause) })
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer conn.Close(context.Background())
			if !conn.NATS().IsConnected() {
				t.Fatalf("Connect returned a connection in state %s, want connected", conn.NATS().Status())
			}
			url := "nats://127.0.0.1:" + port
			nc, err := nats.Connect(url, nats.Timeout(dialTimeout))
			if err == nil {
				nc.Close()
			}
			if got := err == nil; got != tt.open {
				t.Errorf("a client without credentials: accepted %t (%v), want %t", got, err, tt.open)
			}
		})
	}
}

func TestConnectReportsCredentialsRefusedForGood(t *testing.T) {
	s := natstest.Start(t, natstest.ParseConfig(t, testenv.TokenAuth("right-token").ServerConfig))
	url := "nats://wrong-secret@" + strings.TrimPrefix(s.ClientURL(), "nats://")
	var mu sync.Mutex
	var causes []error
	_, err := Connect(context.Background(), Config{URL: url}, func(cause error) {
		mu.Lock()
		defer mu.Unlock()
		causes = append(causes, cause)
	})
	if err == nil || !strings.Contains(err.Error(), "connect to nats "+RedactURL(url)) || strings.Contains(err.Error(), "secret") {
		t.Errorf("Connect: got %v, want an error naming the URL with its credentials redacted", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 1 || !errors.Is(causes[0], ErrClosed) {
		t.Errorf("lost: got %v, want one cause wrapping %v", causes, ErrClosed)
	}
}

func TestConnectStopsWaitingWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Connect(ctx, Config{URL: "nats://127.0.0.1:" + relaytest.FreePort(t)}, func(cause error) { t.Errorf("lost: %v", cause) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Connect: got %v, want %v", err, context.Canceled)
	}
}

func TestAbortStopsPublishingWithoutReportingLost(t *testing.T) {
	s := natstest.Start(t, nil)
	ctx := context.Background()
	conn, err := Connect(ctx, Config{URL: s.ClientURL()}, func(cause error) { t.Errorf("lost: %v", cause) })
	if err != nil {
		t.Fatal(err)
	}
	abort := conn.Abort // what a leader is handed
	abort()
	abort() // again, as a second stop path may
	if !conn.NATS().IsClosed() {
		t.Errorf("after Abort: connection %s, want closed", conn.NATS().Status())
	}
	if err := conn.NATS().Publish("kube.x", []byte("late")); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("publish after Abort: got %v, want %v", err, nats.ErrConnectionClosed)
	}
	conn.Close(ctx) // still allowed
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// healthShutdownTimeout bounds the wait for probe requests in progress at shutdown.
const healthShutdownTimeout = time.Second

// readiness is what /readyz reports; each check returns the reasons it is not ready.
type readiness struct {
	checks atomic.Pointer[[]func() []string]
}

func (r *readiness) set(checks ...func() []string) { r.checks.Store(&checks) }

func (r *readiness) notReady() []string {
	checks := r.checks.Load()
	if checks == nil {
		return []string{"starting"}
	}
	var reasons []string
	for _, c := range *checks {
		reasons = append(reasons, c()...)
	}
	return reasons
}

// serveHealth serves /healthz (the process answers) and /readyz (NATS connected and every
// resource watching) on addr until ctx ends. It returns the address it listens on.
func serveHealth(ctx context.Context, addr string, ready *readiness) (string, func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if reasons := ready.notReady(); len(reasons) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:\n"+strings.Join(reasons, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, &ConfigError{Problems: []Problem{{Var: "RELAY_HTTP_ADDR", Value: addr, Reason: err.Error()}}}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			zerolog.Ctx(ctx).Error().Err(err).Msg("health server stopped")
		}
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
	zerolog.Ctx(ctx).Info().Str("addr", l.Addr().String()).Msg("serving /healthz and /readyz")
	return l.Addr().String(), stop, nil
}

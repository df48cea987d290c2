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

// readiness is what /readyz reports; each check returns the reasons it is not ready, and
// role, when set, says what the process does (leader, standby) in the answer.
type readiness struct {
	checks atomic.Pointer[[]func() []string]
	role   atomic.Pointer[func() string]
	// always holds checks that apply from the start, while starting and after set.
	always atomic.Pointer[[]func() []string]
}

func (r *readiness) set(checks ...func() []string) { r.checks.Store(&checks) }

// setAlways sets checks that apply from now on whatever set sets: while starting too.
func (r *readiness) setAlways(checks ...func() []string) { r.always.Store(&checks) }

func (r *readiness) setRole(role func() string) { r.role.Store(&role) }

func (r *readiness) notReady() []string {
	var reasons []string
	if always := r.always.Load(); always != nil {
		for _, c := range *always {
			reasons = append(reasons, c()...)
		}
	}
	checks := r.checks.Load()
	if checks == nil {
		return append([]string{"starting"}, reasons...)
	}
	for _, c := range *checks {
		reasons = append(reasons, c()...)
	}
	return reasons
}

// describe returns the process's role for the answer, "" when none is set.
func (r *readiness) describe() string {
	if role := r.role.Load(); role != nil {
		return (*role)()
	}
	return ""
}

// serveHealth serves /healthz (alive and not wedged: live's checks), /readyz (ready's checks)
// and, when metrics is not nil, /metrics on addr until ctx ends. It returns the address it
// listens on. No endpoint prints configuration: nothing secret can leak through them.
func serveHealth(ctx context.Context, addr string, ready, live *readiness, metrics http.Handler) (string, func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// live has no checks before the relay runs: starting up is not being wedged.
		if checks := live.checks.Load(); checks != nil {
			if reasons := live.notReady(); len(reasons) > 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, "unhealthy:\n"+strings.Join(reasons, "\n"))
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		role := ready.describe()
		if reasons := ready.notReady(); len(reasons) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			if role != "" {
				fmt.Fprintln(w, role)
			}
			fmt.Fprintln(w, "not ready:\n"+strings.Join(reasons, "\n"))
			return
		}
		if role != "" {
			fmt.Fprintln(w, "ok: "+role)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if metrics != nil {
		mux.Handle("/metrics", metrics)
	}
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

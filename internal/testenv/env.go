package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// KeepEnv names the environment variable that, when set to 1, keeps an Env's directory
// (logs, etcd and JetStream data) after Stop, for debugging; Stop prints where it is.
const KeepEnv = "TESTENV_KEEP"

// Options choose the parts an Env starts.
type Options struct {
	// Kube starts etcd and kube-apiserver.
	Kube bool
	// ControlPlane tunes the control plane when Kube or Cluster is set.
	ControlPlane ControlPlaneOptions
	// Cluster also starts kube-controller-manager, kube-scheduler and kwok with simulated
	// nodes (it implies Kube), so that Deployments get Running Pods, namespace deletion
	// removes the contents and node Leases heartbeat. It adds 5-10 seconds to the start and
	// about 250 MB of memory; packages that only need the API leave it off.
	Cluster bool
	// ClusterOptions tune those parts when Cluster is set.
	ClusterOptions ClusterOptions
	// NATS starts a single nats-server with JetStream.
	NATS bool
	// NATSOptions tune that nats-server.
	NATSOptions NATSOptions
	// Dir is where state and logs go; empty means a new temporary directory.
	Dir string
}

// Env is a running test bed: a control plane and a nats-server, each present when asked for
// in Options. One Env serves a whole test package (see Main).
type Env struct {
	// Dir holds every component's state and logs.
	Dir string
	// Kube is the control plane, or nil.
	Kube *ControlPlane
	// Cluster is the controllers, scheduler and simulated nodes next to Kube, or nil.
	Cluster *Cluster
	// NATS is the nats-server, or nil.
	NATS *NATSServer
}

// Start starts the parts opts asks for, in a new temporary directory.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	dir := opts.Dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "testenv-")
	} else {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	env = e
	if opts.Kube || opts.Cluster {
		if e.Kube, err = StartControlPlane(ctx, filepath.Join(dir, "kube"), opts.ControlPlane); err != nil {
			return nil, fmt.Errorf("start control plane: %w", err)
		}
	}
	if opts.Cluster {
		if e.Cluster, err = StartCluster(ctx, e.Kube, filepath.Join(dir, "cluster"), opts.ClusterOptions); err != nil {
			return nil, fmt.Errorf("start cluster: %w", err)
		}
	}
	if opts.NATS {
		if e.NATS, err = StartNATS(ctx, filepath.Join(dir, "nats"), opts.NATSOptions); err != nil {
			return nil, fmt.Errorf("start nats-server: %w", err)
		}
	}
	return e, nil
}

// Stop ends every process and removes Dir (unless TESTENV_KEEP=1). Safe to call twice.
func (e *Env) Stop() {
	if e.NATS != nil {
		_ = e.NATS.Stop()
	}
	if e.Cluster != nil {
		e.Cluster.Stop()
	}
	if e.Kube != nil {
		e.Kube.Stop()
	}
	if os.Getenv(KeepEnv) == "1" {
		fmt.Fprintf(os.Stderr, "testenv: kept %s\n", e.Dir)
		return
	}
	_ = os.RemoveAll(e.Dir)
}

// TempDir returns a new directory inside the Env's directory, removed with it; for extra
// components a test starts (a NATS cluster, a second nats-server).
func (e *Env) TempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.Dir, "t-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	return dir
}

// Main is a test package's TestMain: it starts an Env with opts, stores it in *env, runs the
// tests, stops everything and exits. An interrupt (SIGINT, SIGTERM) stops the Env before the
// process exits; should the test binary die anyway, its children get SIGKILL from the kernel.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{Kube: true, NATS: true}, &env) }
func Main(m *testing.M, opts Options, env **Env) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	*env = e

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "testenv: %v: stopping the test bed\n", sig)
		e.Stop()
		os.Exit(1)
	}()

	code := m.Run()
	signal.Stop(sigs)
	e.Stop()
	os.Exit(code)
}

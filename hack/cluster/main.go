// Command cluster runs the test bed's full cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and kwok playing kubelet for simulated nodes) and a
// nats-server with JetStream in the foreground until it gets SIGINT or SIGTERM, for people who
// want to try the relay and its consumers by hand. `make cluster-up` runs it in the
// background. -light runs etcd and kube-apiserver only; -nodes sets the number of nodes.
//
// When everything is ready it writes DIR/env with the export lines to use (KUBECONFIG,
// NATS_URL, PATH with kubectl and nats) and prints them.
//
// -clusters=2 (up to 4) starts the fan-in of docs/operations.md ("Many clusters") instead:
// a cluster per name (east, west, north, south), each with a leaf nats-server in a JetStream
// domain of the same name, and a hub nats-server whose aggregate stream KUBE_ALL sources
// every cluster's stream KUBE_<cluster> once the relays have created them. The env file
// then holds a kubeconfig and a relay environment per cluster, and the hub's URL and user.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	dir := fs.String("dir", ".cluster", "directory for state, logs and the env file (emptied first)")
	light := fs.Bool("light", false, "etcd and kube-apiserver only: no controllers, scheduler or nodes")
	nodes := fs.Int("nodes", 1, "number of simulated nodes (kwok)")
	clusters := fs.Int("clusters", 1, "number of clusters; 2 to 4 start the fan-in topology (leaves and a hub)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	envFile := filepath.Join(abs, "env")
	if err := os.RemoveAll(filepath.Join(abs, "state")); err != nil {
		return err
	}
	_ = os.Remove(envFile)
	// The env file is the readiness signal for `make cluster-up`; it goes when we do.
	defer os.Remove(envFile)

	if *nodes < 1 {
		return fmt.Errorf("-nodes %d: want at least 1", *nodes)
	}
	if *clusters < 1 || *clusters > len(fanInNames) {
		return fmt.Errorf("-clusters %d: want 1 to %d", *clusters, len(fanInNames))
	}
	if *clusters > 1 {
		return runFanIn(ctx, fanIn{dir: filepath.Join(abs, "state"), envFile: envFile,
			clusters: fanInNames[:*clusters], light: *light, nodes: *nodes})
	}
	env, err := testenv.Start(ctx, testenv.Options{
		Kube:           true,
		Cluster:        !*light,
		ClusterOptions: testenv.ClusterOptions{Nodes: *nodes},
		NATS:           true,
		Dir:            filepath.Join(abs, "state"),
	})
	if err != nil {
		return err
	}
	defer env.Stop()

	binDir, err := testenv.BinDir()
	if err != nil {
		return err
	}
	exports := fmt.Sprintf("export KUBECONFIG=%s\nexport NATS_URL=%s\nexport PATH=%s:$PATH\n",
		env.Kube.KubeconfigPath(), env.NATS.URL(), binDir)
	if err := os.WriteFile(envFile+".tmp", []byte(exports), 0o600); err != nil {
		return err
	}
	if err := os.Rename(envFile+".tmp", envFile); err != nil {
		return err
	}
	fmt.Print(exports)
	if env.Cluster != nil {
		fmt.Printf("# nodes (simulated by kwok): %s\n", strings.Join(env.Cluster.Nodes(), " "))
	} else {
		fmt.Println("# light mode: no controllers, scheduler or nodes")
	}
	fmt.Printf("# logs: %s\n# cluster running; stop with SIGTERM (make cluster-down)\n", env.Dir)
	<-ctx.Done()
	return nil
}

// Command bench measures kube-nats-relay side by side with the ceiling (nats.go publishing
// alone), bare lists and watches, the machine limit (a bare list and the ceiling run side by
// side) and naive informer-based relays, on a real kube-apiserver, etcd and nats-server on
// loopback, and writes docs/benchmarks.md with its plots. The pods scenario adds
// kube-controller-manager, kube-scheduler and kwok: a Deployment's Pods with churning status
// on simulated nodes, and the large Secrets of the budget scenario. `make bench` runs it;
// BENCH_FLAGS=-quick scales every size down for a run of a few minutes. See internal/bench.
//
// `bench naive ...` runs the naive relay itself; the harness starts it that way as a process
// of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kube-nats-relay/kube-nats-relay/internal/bench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "naive" {
		os.Exit(bench.NaiveMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "bench: interrupted; everything it started is stopped, results so far are saved")
		os.Exit(130)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	full := bench.FullConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "reduced sizes for a run of a few minutes (numbers marked as quick-mode)")
	rounds := fs.Int("rounds", full.Rounds, "rounds of each throughput and latency scenario (quick: 2)")
	syncObjects := fs.Int("sync-objects", full.SyncObjects, "ConfigMaps of the initial sync (quick: 5000)")
	catchup := fs.Int("catchup-changes", full.CatchupChanges, "changes made while the relay is stopped (quick: 2000)")
	catchupHistory := fs.String("catchup-history", strings.Join(full.CatchupHistory, ","), "comma-separated sources of the catch-up's watch history: watch-cache (the apiserver's default), etcd (a second control plane without watch cache for configmaps)")
	steadyObjects := fs.Int("steady-objects", full.SteadyObjects, "ConfigMaps the steady-state writes cycle through (quick: 500)")
	steadyRates := fs.String("steady-rates", joinInts(full.SteadyRates), "comma-separated steady-state write rates, changes/s")
	steadyDuration := fs.Duration("steady-duration", full.SteadyDuration, "length of each steady-state window (quick: 5s)")
	sweepObjects := fs.String("sweep-objects", joinInts(full.SweepObjects), "comma-separated ascending object counts of the sweep, the initial sync at several sizes (quick: 1000,2500,5000)")
	sweepRounds := fs.Int("sweep-rounds", full.SweepRounds, "rounds of the sweep at each size")
	memoryObjects := fs.String("memory-objects", joinInts(full.MemoryObjects), "comma-separated ascending object counts memory is measured at (quick: 2000,10000)")
	budgetSecrets := fs.Int("budget-secrets", full.BudgetSecrets, "Secrets of about 870 KB the budget scenario relays from one namespace")
	budgetObjects := fs.Int("budget-objects", full.BudgetObjects, "small ConfigMaps the budget scenario relays (quick: 10000)")
	settle := fs.Duration("settle", full.Settle, "idle time before reading memory; over 2m the GC trace shows the idle-forced GC (quick: 5s)")
	objectBytes := fs.Int("object-bytes", full.ObjectBytes, "approximate JSON size of each ConfigMap")
	writers := fs.Int("writers", full.Writers, "concurrent writers creating and updating objects")
	runTimeout := fs.Duration("run-timeout", full.RunTimeout, "bound on one contender run (quick: 3m)")
	scenarios := fs.String("scenarios", strings.Join(bench.AllScenarios, ","), "comma-separated scenarios to run")
	microCount := fs.Int("micro-count", full.MicroCount, "-count of the Go micro-benchmarks (quick: 3)")
	pods := fs.Int("pods", full.Pods, "Pods of the pods scenario's Deployment, run on kwok nodes with controllers and a scheduler (quick: 1000)")
	podChurn := fs.Duration("pod-churn-period", full.PodChurnPeriod, "mean cycle of each Pod's status churn in the pods scenario: Ready, container restarted and not Ready, Ready again (quick: 10s)")
	podsWindow := fs.Duration("pods-window", full.PodsWindow, "steady-state window of each contender in the pods scenario (quick: 10s)")
	relayBin := fs.String("relay", "", "relay binary to measure; empty builds ./cmd/relay from the working tree")
	baseline := fs.String("baseline", "", "git revision (built like the working tree) or relay binary to measure beside the relay as relay-before, for a before/after comparison")
	out := fs.String("out", "docs/benchmarks.md", "Markdown report (relative paths are under the repository root)")
	artifacts := fs.String("artifacts", "docs/benchmarks", "directory of JSON results and profiles (relative paths are under the repository root)")
	invokedAs := fs.String("invoked-as", "", "how the run was started, for the report (make bench sets it)")
	render := fs.Bool("render", false, "measure nothing: rewrite the mode's section of the report from its saved JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg := full
	if *quick {
		cfg = bench.QuickConfig()
	}
	// Flags given explicitly override the mode's sizes.
	var parseErrs []error
	fs.Visit(func(f *flag.Flag) {
		var err error
		switch f.Name {
		case "rounds":
			cfg.Rounds = *rounds
		case "sync-objects":
			cfg.SyncObjects = *syncObjects
		case "catchup-changes":
			cfg.CatchupChanges = *catchup
		case "catchup-history":
			cfg.CatchupHistory = strings.Split(*catchupHistory, ",")
		case "steady-objects":
			cfg.SteadyObjects = *steadyObjects
		case "steady-rates":
			cfg.SteadyRates, err = parseInts(*steadyRates)
		case "steady-duration":
			cfg.SteadyDuration = *steadyDuration
		case "sweep-objects":
			cfg.SweepObjects, err = parseInts(*sweepObjects)
		case "sweep-rounds":
			cfg.SweepRounds = *sweepRounds
		case "memory-objects":
			cfg.MemoryObjects, err = parseInts(*memoryObjects)
		case "budget-secrets":
			cfg.BudgetSecrets = *budgetSecrets
		case "budget-objects":
			cfg.BudgetObjects = *budgetObjects
		case "settle":
			cfg.Settle = *settle
		case "object-bytes":
			cfg.ObjectBytes = *objectBytes
		case "writers":
			cfg.Writers = *writers
		case "run-timeout":
			cfg.RunTimeout = *runTimeout
		case "scenarios":
			cfg.Scenarios = strings.Split(*scenarios, ",")
		case "micro-count":
			cfg.MicroCount = *microCount
		case "pods":
			cfg.Pods = *pods
		case "pod-churn-period":
			cfg.PodChurnPeriod = *podChurn
		case "pods-window":
			cfg.PodsWindow = *podsWindow
		}
		if err != nil {
			parseErrs = append(parseErrs, fmt.Errorf("-%s: %w", f.Name, err))
		}
	})
	if err := errors.Join(parseErrs...); err != nil {
		return err
	}

	root, err := repoRoot()
	if err != nil {
		return err
	}
	cfg.RepoRoot = root
	cfg.Out, cfg.ArtifactDir = underRoot(root, *out), underRoot(root, *artifacts)
	cfg.Log = os.Stderr
	cfg.Command = *invokedAs
	if cfg.Command == "" {
		cfg.Command = "go run ./hack/bench " + strings.Join(args, " ")
	}
	if *render {
		return bench.Render(cfg)
	}
	if cfg.SelfBin, err = os.Executable(); err != nil {
		return err
	}
	if cfg.LogDir, err = os.MkdirTemp("", "kube-nats-relay-bench-logs-"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: contender logs in %s\n", cfg.LogDir)
	cfg.RelayBin, cfg.RelayGiven = *relayBin, *relayBin != ""
	if cfg.RelayBin == "" {
		cfg.RelayBin = filepath.Join(cfg.LogDir, "relay")
		build := exec.CommandContext(ctx, "go", "build", "-o", cfg.RelayBin, "./cmd/relay")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build the relay: %w\n%s", err, out)
		}
	}
	if *baseline != "" {
		if cfg.BaselineBin, cfg.Baseline, err = bench.BuildBaseline(ctx, root, *baseline, cfg.LogDir); err != nil {
			return err
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	start := time.Now()
	res, err := bench.Run(ctx, cfg, func(r *bench.Results) error { return bench.Save(cfg, r) })
	if res != nil {
		if serr := bench.Save(cfg, res); serr != nil && err == nil {
			err = serr
		}
		for _, n := range res.Notes {
			fmt.Fprintf(os.Stderr, "bench: note: %s\n", n)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %s run took %s; report %s, contender logs %s\n",
		cfg.Mode, time.Since(start).Round(time.Second), cfg.Out, cfg.LogDir)
	return err
}

// repoRoot is the directory above the working directory that holds go.mod and hack/bench.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "bench")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the kube-nats-relay repository")
		}
		dir = parent
	}
}

// underRoot resolves a relative path against the repository root.
func underRoot(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

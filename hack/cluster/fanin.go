package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// fanInNames are the clusters of -clusters=N, in order; each is also its leaf's JetStream
// domain.
var fanInNames = []string{"east", "west", "north", "south"}

const (
	// aggregateStream is the hub's stream that sources every cluster's.
	aggregateStream = "KUBE_ALL"
	// streamPoll paces the wait for the relays' streams: a person starts them by hand.
	streamPoll = time.Second
)

// fanIn is what runFanIn starts.
type fanIn struct {
	dir, envFile string
	clusters     []string
	light        bool
	nodes        int
}

// runFanIn starts a cluster and a leaf nats-server per name, and the hub; it writes the env
// file, creates the aggregate stream once every relay has created its stream, and runs until
// ctx ends.
func runFanIn(ctx context.Context, f fanIn) error {
	hub, err := testenv.StartNATSHub(ctx, filepath.Join(f.dir, "hub"), 1)
	if err != nil {
		return fmt.Errorf("start the hub: %w", err)
	}
	defer hub.Stop()
	var exports strings.Builder
	binDir, err := testenv.BinDir()
	if err != nil {
		return err
	}
	fmt.Fprintf(&exports, "export PATH=%s:$PATH\n", binDir)
	fmt.Fprintf(&exports, "# the hub (JetStream domain %s), for consumers and the nats CLI; every cluster's events:\n"+
		"#   NATS_URL=$HUB_URL NATS_USER=$HUB_USER NATS_PASSWORD=$HUB_PASSWORD relay tail --stream %s --all\n",
		testenv.HubDomain, aggregateStream)
	fmt.Fprintf(&exports, "export HUB_URL=%s HUB_USER=%s HUB_PASSWORD=%s\n", hub.URLs(), testenv.HubAdminUser, hub.AdminPassword)
	leaves := make(map[string]*testenv.NATSLeaf, len(f.clusters))
	for _, c := range f.clusters {
		env, err := testenv.Start(ctx, testenv.Options{
			Kube:           true,
			Cluster:        !f.light,
			ClusterOptions: testenv.ClusterOptions{Nodes: f.nodes},
			Dir:            filepath.Join(f.dir, c),
		})
		if err != nil {
			return fmt.Errorf("start cluster %s: %w", c, err)
		}
		defer env.Stop()
		leaf, err := testenv.StartNATSLeaf(ctx, filepath.Join(f.dir, "leaf-"+c), c, hub)
		if err != nil {
			return fmt.Errorf("start the leaf of %s: %w", c, err)
		}
		defer leaf.Stop()
		leaves[c] = leaf
		up := strings.ToUpper(c)
		fmt.Fprintf(&exports, "# cluster %s: kubectl --kubeconfig $KUBECONFIG_%s; its relay: env $RELAY_ENV_%s RELAY_RESOURCES=configmaps relay\n", c, up, up)
		fmt.Fprintf(&exports, "export KUBECONFIG_%s=%s\n", up, env.Kube.KubeconfigPath())
		fmt.Fprintf(&exports, "export RELAY_ENV_%s=\"KUBECONFIG=%s NATS_URL=%s RELAY_NATS_USER=%s RELAY_NATS_PASSWORD=%s RELAY_CLUSTER=%s RELAY_STREAM=%s RELAY_HTTP_ADDR=127.0.0.1:0\"\n",
			up, env.Kube.KubeconfigPath(), leaf.URL(), testenv.LeafRelayUser, leaf.RelayPassword, c, event.DefaultStream(c))
	}
	if err := os.WriteFile(f.envFile+".tmp", []byte(exports.String()), 0o600); err != nil {
		return err
	}
	if err := os.Rename(f.envFile+".tmp", f.envFile); err != nil {
		return err
	}
	fmt.Print(exports.String())
	if f.light {
		fmt.Println("# light mode: no controllers, scheduler or nodes")
	}
	fmt.Printf("# logs: %s\n# clusters running; stop with SIGTERM (make cluster-down)\n", f.dir)
	fmt.Printf("# the hub's stream %s is created once every relay has created its stream\n", aggregateStream)
	if err := ensureAggregate(ctx, hub, leaves); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	fmt.Printf("# stream %s created on the hub, sourcing %d clusters\n", aggregateStream, len(leaves))
	<-ctx.Done()
	return nil
}

// ensureAggregate waits until every leaf holds its cluster's stream, then creates the hub's
// aggregate stream over them. Created earlier, the hub would retry the missing sources with a
// back-off of up to 2 minutes.
func ensureAggregate(ctx context.Context, hub *testenv.NATSHub, leaves map[string]*testenv.NATSLeaf) error {
	a := consumer.Aggregate{Name: aggregateStream}
	for _, c := range slices.Sorted(maps.Keys(leaves)) {
		if err := waitStream(ctx, leaves[c], event.DefaultStream(c)); err != nil {
			return err
		}
		a.Sources = append(a.Sources, consumer.ClusterStream{Cluster: c, Domain: c})
	}
	nc, err := nats.Connect(hub.URLs(), hub.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("connect to the hub: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := consumer.EnsureAggregate(ctx, js, a); err != nil {
		return fmt.Errorf("create stream %s on the hub: %w", aggregateStream, err)
	}
	return nil
}

// waitStream waits until stream exists on leaf.
func waitStream(ctx context.Context, leaf *testenv.NATSLeaf, stream string) error {
	nc, err := nats.Connect(leaf.URL(), leaf.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("connect to leaf %s: %w", leaf.Domain, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		_, err := js.Stream(ctx, stream)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %s on leaf %s: %w", stream, leaf.Domain, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(streamPoll):
		}
	}
}

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/kube-nats-relay/kube-nats-relay/checkpoint"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// The relay binary's defaults (cmd/relay/config.go), so that the engine run in-process
// behaves as the binary does.
const (
	engineKubeQPS            = 50
	engineKubeBurst          = 100
	engineBuffer             = 1024
	engineMaxInflight        = 256
	engineCheckpointInterval = time.Second
	engineShutdownTimeout    = 8 * time.Second
	enginePublishTimeout     = 10 * time.Second
)

// engineLabel marks the engine's goroutines in CPU profiles (go tool pprof -tagfocus), so
// that the harness's own work (load generator, consumer) can be told apart.
var engineLabel = pprof.Labels("part", "relay")

// engine is the relay's engine (relay.Source with the checkpoint store and the object index)
// run inside the harness, wired as cmd/relay wires it, for pprof profiles and an exact heap
// figure. The binary has no profiling endpoint; this is how its code is profiled.
type engine struct {
	nc     *nats.Conn
	pub    *relay.AckPublisher
	cancel context.CancelFunc
	done   chan error
}

// startEngine starts the engine over namespace, publishing to n's stream (which must exist).
func (e *Env) startEngine(ctx context.Context, n names, namespace string) (*engine, error) {
	type started struct {
		en  *engine
		err error
	}
	ch := make(chan started, 1)
	// Everything the engine starts, its NATS connection's goroutines included, inherits the
	// label of this goroutine.
	go pprof.Do(context.WithoutCancel(ctx), engineLabel, func(lctx context.Context) {
		en, err := e.buildEngine(lctx, n, namespace)
		ch <- started{en, err}
	})
	select {
	case s := <-ch:
		return s.en, s.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (e *Env) buildEngine(ctx context.Context, n names, namespace string) (*engine, error) {
	nc, err := nats.Connect(e.test.NATS.URL())
	if err != nil {
		return nil, err
	}
	// Publish as the relay binary does: one reply subscription for every acknowledgement.
	pub, err := relay.NewAckPublisher(nc, enginePublishTimeout)
	if err != nil {
		nc.Close()
		return nil, err
	}
	fail := func(err error) (*engine, error) { pub.Close(); nc.Close(); return nil, err }
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(engineMaxInflight+1),
		jetstream.WithPublishAsyncTimeout(enginePublishTimeout))
	if err != nil {
		return fail(err)
	}
	store, err := checkpoint.Open(ctx, js, checkpoint.Config{Bucket: n.checkpoints, Replicas: 1})
	if err != nil {
		return fail(err)
	}
	idx, err := checkpoint.OpenIndex(ctx, js, checkpoint.IndexConfig{Bucket: n.index, Replicas: 1})
	if err != nil {
		return fail(err)
	}
	cfg := rest.CopyConfig(e.test.Kube.RESTConfig())
	cfg.QPS, cfg.Burst = engineKubeQPS, engineKubeBurst
	cfg.DisableCompression = true // as the relay does by default (RELAY_KUBE_COMPRESSION)
	// Read as the relay binary does: one-pass decoding of list and watch responses.
	raw, err := relay.NewRawReaders(cfg)
	if err != nil {
		return fail(err)
	}
	src, err := relay.NewSource(relay.SourceConfig{
		Cluster:            n.cluster,
		Prefix:             prefix,
		Resource:           configMapResource,
		Namespace:          namespace,
		InitialSync:        true,
		Buffer:             engineBuffer,
		MaxInflight:        engineMaxInflight,
		CheckpointInterval: engineCheckpointInterval,
		MaxPayload:         int(nc.MaxPayload()),
		ShutdownTimeout:    engineShutdownTimeout,
		WatchList:          relay.WatchListAuto, // the relay binary's default
	}, relay.SourceDeps{Readers: raw, Publisher: pub, Checkpointer: store, Index: objectIndex{idx}})
	if err != nil {
		return fail(err)
	}
	logFile, err := os.OpenFile(filepath.Join(e.cfg.LogDir, "engine.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	log := zerolog.New(logFile).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	runCtx = log.WithContext(runCtx)
	en := &engine{nc: nc, pub: pub, cancel: cancel, done: make(chan error, 1)}
	go func() {
		en.done <- relay.New(src).Run(runCtx)
		logFile.Close()
	}()
	return en, nil
}

// stop ends the engine (final checkpoint included) and closes its connection.
func (en *engine) stop() error {
	en.cancel()
	var err error
	select {
	case err = <-en.done:
	case <-time.After(stopTimeout):
		err = fmt.Errorf("engine still running %s after cancel", stopTimeout)
	}
	en.pub.Close()
	en.nc.Close()
	return err
}

// engineFailed reports whether the engine stopped on its own.
func (en *engine) failed() error {
	select {
	case err := <-en.done:
		en.done <- err
		return fmt.Errorf("engine stopped: %v", err)
	default:
		return nil
	}
}

// objectIndex is the checkpoint package's index as the relay engine declares it (as cmd/relay
// wires it).
type objectIndex struct{ *checkpoint.Index }

// Load loads source's index and returns its journal.
func (ix objectIndex) Load(ctx context.Context, source string, fn func(object, uid, rv string, held []string)) (relay.IndexJournal, error) {
	j, err := ix.Index.Load(ctx, source, fn)
	if err != nil {
		return nil, err
	}
	return j, nil
}

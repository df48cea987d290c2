package main

import "github.com/kube-nats-relay/kube-nats-relay/event"

// derivedNames says which stream and bucket names were derived from the cluster.
type derivedNames struct {
	stream, checkpoints, index, mirror bool
}

// all reports whether every name was derived: none of RELAY_STREAM, RELAY_CHECKPOINT_BUCKET,
// RELAY_INDEX_BUCKET and RELAY_MIRROR_BUCKET was set.
func (d derivedNames) all() bool { return d.stream && d.checkpoints && d.index && d.mirror }

// resolveNames gives the stream and the buckets whose variable is unset (or empty) their
// per-cluster name (event.DefaultStream and its kin), and records which it derived. Validation
// then checks the names the relay will use.
func (c *Config) resolveNames() {
	for _, n := range []struct {
		name    *string
		derived *bool
		def     func(string) string
	}{
		{&c.Stream, &c.derivedNames.stream, event.DefaultStream},
		{&c.CheckpointBucket, &c.derivedNames.checkpoints, event.DefaultCheckpointBucket},
		{&c.IndexBucket, &c.derivedNames.index, event.DefaultIndexBucket},
		{&c.MirrorBucket, &c.derivedNames.mirror, event.DefaultMirrorBucket},
	} {
		if *n.name == "" {
			*n.name, *n.derived = n.def(c.Cluster), true
		}
	}
}

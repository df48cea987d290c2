package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
)

// runPartitioned is the partitioned mode (-partitions): several instances share the objects
// out, each object's events handled by one instance at a time, in order. Every instance joins
// the group (a stream named -durable that sources the relay's stream, partitioned by
// namespace and name, created beforehand with -create-group) as member -member of -members;
// it handles its partitions until ctx ends, then finishes the events in hand. An instance
// never creates the group: one that started after the group was deleted would otherwise
// replay the relay's whole stream.
//
// Each instance keeps its own journal. The event an instance was handling when it crashed may
// be journaled by that instance and, after -ack-wait, again by the instance that takes the
// partition over: its tracker knows only its own journal. A service that needs exactly once
// across instances keeps its record where every instance reads it (consumer.KVStore, or the
// database its work goes to).
func runPartitioned(ctx context.Context, js jetstream.JetStream, o options, handler jetstream.MessageHandler) error {
	log := zerolog.Ctx(ctx)
	log.Info().Str("stream", o.stream).Str("group", o.durable).Int("partitions", o.partitions).
		Int("member", o.member).Int("members", o.members).Msg("consuming partitions")
	err := consumer.JoinPartitioned(ctx, js, o.durable, handler, consumer.AsMember(o.member, o.members),
		consumer.OnConsumeError(func(p int, err error) {
			log.Warn().Err(err).Int("partition", p).Msg("consume")
		}))
	if err != nil {
		return fmt.Errorf("partitioned group %s: %w", o.durable, err)
	}
	return nil
}

// createGroup is the deployment step of the partitioned mode (-create-group): it creates the
// group over the relay's stream from its first event, an audit trail wanting every change,
// or checks the group that exists, and returns.
func createGroup(ctx context.Context, js jetstream.JetStream, o options) error {
	if _, err := consumer.EnsurePartitioned(ctx, js, consumer.PartitionConfig{
		Name: o.durable, Source: o.stream, Prefix: o.prefix, Partitions: o.partitions, AckWait: o.ackWait, ReplayAll: true,
	}); err != nil {
		return err
	}
	zerolog.Ctx(ctx).Info().Str("stream", o.stream).Str("group", o.durable).Int("partitions", o.partitions).Msg("group created")
	return nil
}

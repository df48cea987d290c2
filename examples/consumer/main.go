// Command consumer is an example downstream service of kube-nats-relay: it keeps an audit
// trail of ConfigMap changes, one JSON line per change, in a journal file. It reads the
// relay's stream through a durable JetStream consumer and handles every event exactly once,
// across its own restarts and crashes (kill -9 included):
//
//   - the journal line is both the work and the record that it was done: one append, synced
//     to disk, so no crash can separate the two;
//   - a consumer.Tracker, rebuilt from the journal at start, remembers per object the
//     resourceVersion last handled: a change that is not newer is acknowledged and not
//     handled again (a redelivery after a crash, or a replay by the relay);
//   - a message is acknowledged only after its line is on disk, so nothing acknowledged is
//     lost; what was delivered and not acknowledged comes again after -ack-wait.
//
// One event is in flight at a time (MaxAckPending 1), so the journal holds each object's
// changes in the order they happened, even across a crash. The price: after a crash, the
// successor receives nothing until -ack-wait has passed since the event in flight was
// delivered (docs/events.md, "The cost of MaxAckPending: 1"). It does not bootstrap from the
// state mirror: an audit trail records changes, and it reads the stream from its first event.
//
// With -partitions, several instances share the objects out as a partitioned group
// (partitioned.go), each object's events still handled by one instance at a time, in order.
//
// Usage:
//
//	consumer -server nats://127.0.0.1:4222 -cluster prod -journal audit.jsonl
//	consumer -cluster prod -partitions 6 -create-group
//	consumer -cluster prod -partitions 6 -member 0 -members 3 -journal audit-0.jsonl
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-nats-relay/kube-nats-relay/consumer"
	"github.com/kube-nats-relay/kube-nats-relay/event"
)

const (
	// defaultServer is where a local relay's embedded nats-server listens.
	defaultServer = "nats://127.0.0.1:4222"
	// connectTimeout bounds the first connection: a service started before NATS fails fast
	// and is restarted by its supervisor.
	connectTimeout = 5 * time.Second
	// defaultAckWait is how long a delivered event may stay unacknowledged before JetStream
	// delivers it again: far longer than writing one line takes, and what a crashed instance's
	// successor waits, at most, for the event that was in flight.
	defaultAckWait = 30 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly, NoColor: true}).With().Timestamp().Logger()
	if err := run(log.WithContext(ctx), os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		log.Error().Err(err).Msg("consumer failed")
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	server, stream, prefix, cluster, namespace, durable, journal string
	ackWait, workDelay                                           time.Duration
	// partitions, member and members set up the partitioned mode (partitioned.go).
	partitions, member, members int
	// createGroup makes the instance the deployment step of the partitioned mode: it creates
	// the group and exits.
	createGroup bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	server := os.Getenv("NATS_URL")
	if server == "" {
		server = defaultServer
	}
	var o options
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", server, "NATS server URLs, comma-separated; defaults to $NATS_URL when set")
	fs.StringVar(&o.stream, "stream", "", "the relay's JetStream stream (RELAY_STREAM); empty: the relay's default for -cluster, KUBE_<cluster>")
	fs.StringVar(&o.prefix, "prefix", "kube", "the relay's subject prefix (RELAY_SUBJECT_PREFIX)")
	fs.StringVar(&o.cluster, "cluster", "default", "the relay's cluster name (RELAY_CLUSTER)")
	fs.StringVar(&o.namespace, "namespace", "", "only ConfigMaps of this namespace; empty: every namespace")
	fs.StringVar(&o.durable, "durable", "configmap-audit", "durable consumer name: the service's position in the stream")
	fs.StringVar(&o.journal, "journal", "configmap-audit.jsonl", "journal file: the audit trail, and the record of what was handled")
	fs.DurationVar(&o.ackWait, "ack-wait", defaultAckWait, "redeliver an event not acknowledged after this long (applied to an existing consumer too)")
	fs.DurationVar(&o.workDelay, "work-delay", 0, "pretend each event takes this long to handle (for demonstrations and tests)")
	fs.IntVar(&o.partitions, "partitions", 0, "share the objects out over this many partitions among -members instances (a partitioned group named -durable); 0: one durable consumer")
	fs.IntVar(&o.member, "member", 0, "with -partitions: this instance's index among -members, from 0")
	fs.IntVar(&o.members, "members", 1, "with -partitions: how many instances share the partitions")
	fs.BoolVar(&o.createGroup, "create-group", false, "with -partitions: create the partitioned group from the stream's first event (or check it) and exit; the deployment step, since members only join")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.stream == "" {
		o.stream = event.DefaultStream(o.cluster)
	}
	if o.createGroup && o.partitions == 0 {
		return options{}, errors.New("-create-group: want -partitions too")
	}
	if o.partitions < 0 || o.members < 1 || o.member < 0 || o.member >= o.members {
		return options{}, fmt.Errorf("-partitions %d -member %d -members %d: want partitions >= 0 and 0 <= member < members",
			o.partitions, o.member, o.members)
	}
	return o, nil
}

// run follows the stream until ctx ends, then stops taking events, finishes the one in hand
// and flushes its acknowledgement.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := zerolog.Ctx(ctx)
	closed := make(chan struct{})
	nc, err := nats.Connect(o.server, nats.Name("kube-nats-relay-example-consumer"),
		nats.Timeout(connectTimeout), nats.MaxReconnects(-1),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", o.server, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if o.createGroup {
		return createGroup(ctx, js, o)
	}
	j, err := openJournal(o.journal)
	if err != nil {
		return err
	}
	defer j.Close()
	log.Info().Str("journal", o.journal).Int("handled", j.Len()).Msg("journal opened")

	svc, err := newService(ctx, j, o.workDelay, log)
	if err != nil {
		return err
	}
	if o.partitions > 0 {
		svc.member, svc.namespace = fmt.Sprintf("%d/%d", o.member, o.members), o.namespace
	}
	// The handler runs on until the consumer is drained, so it gets a context that outlives
	// ctx: a SIGTERM lets the event in hand finish instead of failing it.
	handler, err := svc.messageHandler(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	if o.partitions > 0 {
		err = runPartitioned(ctx, js, o, handler)
	} else {
		err = runDurable(ctx, js, o, handler)
	}
	if err != nil {
		return err
	}
	if err := nc.Drain(); err != nil { // flush the last acknowledgement
		return fmt.Errorf("drain nats connection: %w", err)
	}
	<-closed
	log.Info().Int("handled", j.Len()).Msg("stopped")
	return nil
}

// runDurable follows the ConfigMaps' events with one durable consumer, one event at a time,
// until ctx ends, and then finishes the event in hand.
func runDurable(ctx context.Context, js jetstream.JetStream, o options, handler jetstream.MessageHandler) error {
	log := zerolog.Ctx(ctx)
	filter := consumer.ResourceFilter(o.prefix, o.cluster, schema.GroupResource{Resource: "configmaps"})
	filter.Namespace = o.namespace
	subjects, err := consumer.Subjects(filter)
	if err != nil {
		return err
	}
	cons, err := consumer.Durable(ctx, js, o.stream, o.durable, subjects,
		consumer.MaxAckPending(1), consumer.AckWait(o.ackWait), consumer.UpdateExisting())
	if err != nil {
		return err
	}
	cc, err := cons.Consume(handler, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		log.Warn().Err(err).Msg("consume")
	}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", o.durable, err)
	}
	log.Info().Str("stream", o.stream).Str("durable", o.durable).Strs("subjects", subjects).
		Bool("created", cons.Created).Bool("updated", cons.Updated).Msg("consuming")

	<-ctx.Done()
	cc.Drain() // take no more, finish what was delivered
	<-cc.Closed()
	return nil
}

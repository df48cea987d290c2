package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// maxPullPriority is the lowest priority (highest number) a pull request may carry: the
// server takes 0 to 9.
const maxPullPriority = 9

// JoinOption sets up a member of a partitioned group (JoinPartitioned).
type JoinOption func(*joinOptions) error

// joinOptions collects the options.
type joinOptions struct {
	index, members int
	onError        func(partition int, err error)
}

// AsMember makes the caller member index (counted from 0) of a group of members: the first
// choice for the partitions p with p % members == index, and a standby for the others, in an
// order that spreads a missing member's partitions over the rest. Give each replica of a
// service its own index (a StatefulSet's ordinal); members should be the replica count. A
// wrong count or two replicas of one index cost balance, never order: the server still
// delivers one event of a partition at a time. Without AsMember a member is member 0 of 1:
// the first choice for every partition, like every other such member.
func AsMember(index, members int) JoinOption {
	return func(o *joinOptions) error {
		if members < 1 || index < 0 || index >= members {
			return fmt.Errorf("member %d of %d: want 0 <= index < members", index, members)
		}
		o.index, o.members = index, members
		return nil
	}
}

// OnConsumeError has fn called with the errors of a partition's pull subscription that
// JoinPartitioned goes on after (a missed heartbeat, a reconnect), for logging. They are
// not the handler's errors.
func OnConsumeError(fn func(partition int, err error)) JoinOption {
	return func(o *joinOptions) error {
		if fn == nil {
			return errors.New("nil consume error function")
		}
		o.onError = fn
		return nil
	}
}

// JoinPartitioned makes the caller a member of the partitioned group (EnsurePartitioned) and
// hands it its share of the events: handler is called with each event delivered to this
// member, until ctx ends. Then JoinPartitioned stops taking events, waits for the handler
// calls in progress to return (give handler a context that outlives ctx to let them finish)
// and returns nil. It returns an error when it cannot start, or when a partition's
// subscription ends without ctx ending (the connection was closed, the group deleted).
//
// The member pulls from every partition, each with its priority (AsMember); the server
// delivers each event to the member of best priority that is waiting, so a partition is
// handled by its first-choice member while that member runs, by a standby when it does not,
// and again by the first choice as soon as it is back. Each partition has one event in flight
// at a time (MaxAckPending 1): whichever member receives it, the next event of the partition
// comes only after this one is acknowledged, or, if it is not, after the same event came again
// when AckWait passed. So one object's events are handled in stream order and never by two
// members at once, across members joining, leaving and dying: a member killed while it
// handles events holds up the partitions of those events for AckWait, not more, and each such
// event is handled again by whoever then receives it (use a Tracker whose store the members
// share, or idempotent work). The limit is JetStream's: a member cut off from the server that
// keeps working on an event past AckWait (its InProgress signals lost) may still be at work
// when the event is delivered to another.
//
// handler is called concurrently for different partitions and serially within one; use
// Handler (and a Tracker) to build it. The messages handler receives carry the relay's
// subject (Subject, and so Decode, see no partition token); PartitionOf tells their
// partition. Their stream sequence (Event.Sequence) is the group stream's own.
func JoinPartitioned(ctx context.Context, js jetstream.JetStream, group string, handler jetstream.MessageHandler, opts ...JoinOption) error {
	o := joinOptions{members: 1, onError: func(int, error) {}}
	var errs []error
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			errs = append(errs, err)
		}
	}
	if err := validateStreamName(group); err != nil {
		errs = append(errs, fmt.Errorf("group: %w", err))
	}
	if handler == nil {
		errs = append(errs, errors.New("nil handler"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("join partitioned group %q: %w", group, err)
	}
	partitions, err := groupPartitions(ctx, js, group)
	if err != nil {
		return fmt.Errorf("join partitioned group %q: %w", group, err)
	}

	ccs := make([]jetstream.ConsumeContext, 0, partitions)
	stop := func() {
		for _, cc := range ccs {
			cc.Drain() // take no more; the handler calls in progress finish
		}
		for _, cc := range ccs {
			<-cc.Closed()
		}
	}
	for p := range partitions {
		cc, err := consumePartition(ctx, js, group, p, handler, o)
		if err != nil {
			stop()
			return fmt.Errorf("join partitioned group %q: %w", group, err)
		}
		ccs = append(ccs, cc)
	}

	// Wait for ctx, or for a subscription that ends on its own. Each watcher ends when its
	// subscription does, which stop makes sure of.
	ended := make(chan int, len(ccs))
	for p, cc := range ccs {
		go func() {
			<-cc.Closed()
			ended <- p
		}()
	}
	select {
	case <-ctx.Done():
		stop()
		return nil
	case p := <-ended:
		stop()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("join partitioned group %q: partition %d: subscription ended", group, p)
	}
}

// consumePartition starts pulling partition p's events at the member's priority.
func consumePartition(ctx context.Context, js jetstream.JetStream, group string, p int, handler jetstream.MessageHandler, o joinOptions) (jetstream.ConsumeContext, error) {
	cons, err := js.Consumer(ctx, group, partitionConsumerName(p))
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { handler(newPartitionMsg(msg, p)) },
		jetstream.PullPriorityGroup(priorityGroup),
		jetstream.PullPrioritized(memberPriority(o.index, o.members, p)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { o.onError(p, err) }))
	if err != nil {
		return nil, fmt.Errorf("partition %d: consume: %w", p, err)
	}
	return cc, nil
}

// groupPartitions returns the partition count of the group's stream, or ErrNotPartitioned.
func groupPartitions(ctx context.Context, js jetstream.JetStream, group string) (int, error) {
	s, err := js.Stream(ctx, group)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, fmt.Errorf("%w: %w", ErrNotPartitioned, err)
	}
	if err != nil {
		return 0, err
	}
	v := s.CachedInfo().Config.Metadata[metaPartitions]
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPartitions {
		return 0, fmt.Errorf("%w: metadata %s is %q, want 1 to %d", ErrNotPartitioned, metaPartitions, v, MaxPartitions)
	}
	return n, nil
}

// memberPriority is the priority of member index of members on partition p: 0 for the first
// choice (p % members), 1 to members-1 for the others, in the ring order after the first
// choice rotated by p / members, so that the partitions of one member have different next
// choices; capped at the lowest priority the server takes.
func memberPriority(index, members, p int) int {
	first := p % members
	if index == first {
		return 0
	}
	others := members - 1
	ring := ((index-first-1)%members + members) % members // 0 to others-1: the place after first
	d := ((ring-p/members)%others + others) % others
	return min(1+d, maxPullPriority)
}

// partitionMsg is a message of a partitioned group as the handler sees it: the event's own
// subject, without the partition token the group's stream stores in front of it.
type partitionMsg struct {
	jetstream.Msg
	subject   string
	partition int
}

// newPartitionMsg wraps msg of partition p.
func newPartitionMsg(msg jetstream.Msg, p int) *partitionMsg {
	subject := msg.Subject()
	if i := strings.IndexByte(subject, '.'); i >= 0 {
		subject = subject[i+1:]
	}
	return &partitionMsg{Msg: msg, subject: subject, partition: p}
}

// Subject returns the subject the relay published the event on.
func (m *partitionMsg) Subject() string { return m.subject }

// PartitionOf returns the partition of a message JoinPartitioned delivered, and false for any
// other message.
func PartitionOf(msg jetstream.Msg) (int, bool) {
	if m, ok := msg.(*partitionMsg); ok {
		return m.partition, true
	}
	return 0, false
}

package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
// calls in progress to return and returns nil. A Handler built on the same ctx sees it end:
// the work in hand is cancelled and its event naked, to come again at once to another member
// (the README's snippet does this); build it on a context cancelled only after
// JoinPartitioned returns to let the work finish instead. It returns an error when it cannot start, or when a partition's
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
// share, or idempotent work). While the handler runs, JoinPartitioned tells the server every
// AckWait/3 that the event is in progress, so a handler may take longer than AckWait without
// the event coming again. The limit is JetStream's: a member that works on an event longer
// than AckWait without those signals reaching the server (cut off from it, or stalled) may
// still be at work when the event is delivered to another.
//
// A member that stops cleanly, or whose connection the server sees closed, hands its
// partitions over at once. One cut off without the connection closing keeps its pull
// requests until they expire (AckWait/2, 1 s to 30 s): the events the server delivers to
// it meanwhile come again after AckWait, so such a partition pauses for up to the expiry
// plus AckWait.
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

// consumePartition starts pulling partition p's events at the member's priority. It tells the
// server every AckWait/3 that an event in hand is still in progress, whatever the handler
// does, so that a slow handler keeps its event; and it renews its pull requests every
// pullExpiry(AckWait), so that a member gone without its connection closing holds no pull
// request past that.
func consumePartition(ctx context.Context, js jetstream.JetStream, group string, p int, handler jetstream.MessageHandler, o joinOptions) (jetstream.ConsumeContext, error) {
	cons, err := js.Consumer(ctx, group, partitionConsumerName(p))
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = DefaultPartitionAckWait
	}
	expiry := pullExpiry(ackWait)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		handleInProgress(newPartitionMsg(msg, p), handler, max(ackWait/3, minInProgress))
	},
		jetstream.PullPriorityGroup(priorityGroup),
		jetstream.PullPrioritized(memberPriority(o.index, o.members, p)),
		jetstream.PullExpiry(expiry),
		jetstream.PullHeartbeat(pullHeartbeat(expiry)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { o.onError(p, err) }))
	if err != nil {
		return nil, fmt.Errorf("partition %d: consume: %w", p, err)
	}
	return cc, nil
}

// Bounds of a member's pull requests (pullExpiry): the client's limits.
const (
	// minPullExpiry is the shortest pull request the client makes.
	minPullExpiry = time.Second
	// maxPullExpiry is the longest: the client's default, and the longest a member gone
	// without a word holds a pull request however long AckWait is.
	maxPullExpiry = 30 * time.Second
	// minInProgress bounds how often an event in hand is signalled in progress, for a
	// consumer of a tiny AckWait.
	minInProgress = 10 * time.Millisecond
	// minPullHeartbeat and maxPullHeartbeat are the client's bounds of a heartbeat.
	minPullHeartbeat = 500 * time.Millisecond
	maxPullHeartbeat = 30 * time.Second
)

// pullExpiry is how long a member's pull request waits at the server: half of AckWait, within
// the client's bounds. A member cut off from the server without its connection closing keeps
// its pull requests until they expire, and the server goes on delivering its partitions to
// them, for up to this long; the events so delivered come again after AckWait.
func pullExpiry(ackWait time.Duration) time.Duration {
	return min(max(ackWait/2, minPullExpiry), maxPullExpiry)
}

// pullHeartbeat is the idle heartbeat of pull requests of that expiry: half of it, within the
// client's bounds, so that a member notices a lost server (OnConsumeError) within an expiry.
func pullHeartbeat(expiry time.Duration) time.Duration {
	return min(max(expiry/2, minPullHeartbeat), maxPullHeartbeat)
}

// handleInProgress calls handler with msg, telling the server every interval that msg is in
// progress until handler returns. An InProgress after the handler acknowledged msg is refused
// by the server and costs nothing.
func handleInProgress(msg jetstream.Msg, handler jetstream.MessageHandler, interval time.Duration) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress() // a lost signal costs at most a redelivery
			}
		}
	}()
	defer func() {
		close(done)
		<-stopped
	}()
	handler(msg)
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

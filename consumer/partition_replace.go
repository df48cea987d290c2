package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// sourceHeader is the header under which the server records, on each sourced message, the
// source stream and the message's sequence there ("<stream> <sequence> ...").
const sourceHeader = "Nats-Stream-Source"

// replacementAttempts bounds how often ReplacementStart reads the group again when its
// oldest event is acknowledged while it reads.
const replacementAttempts = 3

// ReplacementStart returns the StartSequence of a group that replaces group (one of another
// partition count, or another name): the source sequence of the oldest event group still
// holds, or, when it holds none, the one after the last event it sourced. Call it with
// group's members stopped, then create the new group (EnsurePartitioned) with it, start the
// new group's members and delete the old group's stream: no event is lost. Events of other
// partitions between the oldest held and the last sourced, that the old members had already
// handled, are handled again (a shared Tracker, or idempotent work, skips them); an event the
// old members handle after the call, were they not stopped, is handled by both groups.
//
// It needs a server that reports a stream source's last sequence (nats-server 2.11 or later),
// and fails with ErrNotPartitioned if group is not a partitioned group.
func ReplacementStart(ctx context.Context, js jetstream.JetStream, group string) (uint64, error) {
	if _, err := groupPartitions(ctx, js, group); err != nil {
		return 0, fmt.Errorf("replacement start of %q: %w", group, err)
	}
	for range replacementAttempts {
		seq, ok, err := replacementStart(ctx, js, group)
		if err != nil {
			return 0, fmt.Errorf("replacement start of %q: %w", group, err)
		}
		if ok {
			return seq, nil
		}
	}
	return 0, fmt.Errorf("replacement start of %q: its oldest event went %d times while read: stop its members", group, replacementAttempts)
}

// replacementStart reads the last sourced sequence, then the oldest event held; ok is false
// when that event went meanwhile. The order matters: an event sourced after the first read
// has a later sequence, and is covered by either answer.
func replacementStart(ctx context.Context, js jetstream.JetStream, group string) (seq uint64, ok bool, err error) {
	s, err := js.Stream(ctx, group)
	if err != nil {
		return 0, false, err
	}
	info := s.CachedInfo()
	source := info.Config.Metadata[metaSource]
	var last uint64
	found := false
	for _, si := range info.Sources {
		if si != nil && si.Name == source {
			last, found = si.Seq, true
		}
	}
	if !found {
		return 0, false, fmt.Errorf("%w: no source %q in its state", ErrNotPartitioned, source)
	}
	info, err = s.Info(ctx)
	if err != nil {
		return 0, false, err
	}
	if info.State.Msgs == 0 {
		if last == 0 {
			// Nothing sourced: the old group's own start stands.
			var start uint64 = 1
			if len(info.Config.Sources) > 0 {
				start = max(info.Config.Sources[0].OptStartSeq, 1)
			}
			return start, true, nil
		}
		return last + 1, true, nil
	}
	msg, err := s.GetMsg(ctx, info.State.FirstSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("oldest event %d: %w", info.State.FirstSeq, err)
	}
	fields := strings.Fields(msg.Header.Get(sourceHeader))
	if len(fields) < 2 {
		return 0, false, fmt.Errorf("oldest event %d: header %s %q, want a stream and a sequence", info.State.FirstSeq, sourceHeader, msg.Header.Get(sourceHeader))
	}
	first, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("oldest event %d: header %s %q: %w", info.State.FirstSeq, sourceHeader, msg.Header.Get(sourceHeader), err)
	}
	if last > 0 {
		first = min(first, last+1)
	}
	return first, true, nil
}
